"""Which rows changed after a change that was rejected: what lets a replay skip a change that is no longer news.

A rejected change leaves no trace in the table; if its row is deleted later, nothing in the rows says so. The
watch remembers the keys of rejected changes and the position of the last change applied to each of them since,
so a replay of the rejected change can tell it was overtaken even when the row is gone. Bounded: beyond
`max_keys` the oldest keys are forgotten (a replay then falls back to the stored row's position). One watch per
table, in every service that replays dead letters (fan-out and query), so their replays decide alike.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position

DEFAULT_MAX_KEYS = 100_000

#: The key of the stored row some values (a full row or an old key) name; None when no row matches. Raises the
#: service's own error when the values cannot name a row at all.
FindKey = Callable[[Mapping[str, Any]], Hashable | None]


class KeyWatch:
    def __init__(self, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self._max_keys = max_keys
        self._touched: dict[Hashable, Position | None] = {}

    def __len__(self) -> int:
        return len(self._touched)

    def rejected(self, key: Hashable) -> None:
        """A change of `key` was rejected: watch it from now on."""
        if key not in self._touched:
            if len(self._touched) >= self._max_keys:
                del self._touched[next(iter(self._touched))]
            self._touched[key] = None

    def touched(self, key: Hashable, position: Position) -> None:
        """A change of `key` at `position` was applied (cheap when the key is not watched)."""
        if key in self._touched:
            self._touched[key] = position

    def changed_after(self, key: Hashable, position: Position) -> bool | None:
        """Whether a change after `position` was applied to `key`; None when the key is not watched."""
        if key not in self._touched:
            return None
        touched = self._touched[key]
        return touched is not None and touched > position

    def saw(self, change: RowChange, find_key: FindKey, not_found: tuple[type[Exception], ...] = ()) -> None:
        """An applied change (even one that changed nothing) touched the rows its old and new values name;
        values that name no row (`find_key` raised one of `not_found`) touch nothing."""
        if change.action is Action.TRUNCATE:  # every row changed
            self._touched = dict.fromkeys(self._touched, change.position)
            return
        for values in (change.old, change.new):
            if values:
                try:
                    key = find_key(values)
                except not_found:
                    continue
                if key is not None:
                    self.touched(key, change.position)
