"""When a replayed dead letter's change is no longer news: one rule for every service that replays letters.

A replay never rolls a row back. A change is SUPERSEDED (nothing is applied) when:
- a TRUNCATE: the table applied a stream change after it;
- its key is watched (the table's KeyWatch saw a rejected change of that key): a later change of that key was
  applied, even a delete;
- otherwise, by the position of the change that last wrote the stored row: a DELETE whose row is gone or was
  written after it; an INSERT or UPDATE whose row exists and was written at or after it. A row without a
  position counts as older than any change.
Fan-out and query both decide with `superseded`, each over its own rows (RowsByKey), so given the same letters
and the same stream they keep the same rows.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Protocol

from laredo_kernel.changes import Action, RowChange
from laredo_core.deadletters.key_watch import KeyWatch
from laredo_kernel.position import Position

__all__ = ["ABSENT", "RowsByKey", "superseded", "truncate_superseded"]

#: What RowsByKey.written_at answers for a key with no stored row.
ABSENT: Any = object()


class RowsByKey(Protocol):
    """A table's rows as the rule sees them."""

    def key_of(self, values: Mapping[str, Any]) -> Hashable:
        """The primary key of a row's values; raises the service's not-applicable error when it has none."""
        ...

    def written_at(self, key: Hashable) -> Position | None:
        """The position of the change that last wrote the row at `key` (None: unknown); ABSENT: no such row."""
        ...


def superseded(change: RowChange, rows: RowsByKey, watch: KeyWatch, applied: Position | None) -> bool:
    """Whether the table already holds something newer than `change` (see the module's rules). `applied`: the
    table's applied position (repairs made on this instance after it do not count: they are no stream change)."""
    position = change.position
    if change.action is Action.TRUNCATE:
        return truncate_superseded(applied, change)
    values = change.old if change.action is Action.DELETE else change.new
    key = rows.key_of(values or {})
    later = watch.changed_after(key, position)
    if later is not None:
        return later
    written = rows.written_at(key)
    if change.action is Action.DELETE:
        return written is ABSENT or (written is not None and written > position)
    return written is not ABSENT and written is not None and written >= position


def truncate_superseded(applied: Position | None, change: RowChange) -> bool:
    """Whether a TRUNCATE letter is overtaken: the table applied a stream change after it."""
    return applied is not None and applied.stream > change.position
