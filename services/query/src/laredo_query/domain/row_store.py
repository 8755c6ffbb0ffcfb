"""Query's rows of one table: the shared table core (laredo_kernel.table_core), keyed by canonical primary key.

Invariants (besides the core's):
- a stored row version is never mutated, its cached wire form aside;
- an effect's action says what happened to this copy: a put is an INSERT when no row was there before, else
  an UPDATE (a baseline row replacing a stored one too), whatever the change called itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position
from laredo_kernel.table_core import RowEffect as CoreEffect
from laredo_kernel.table_core import TableCore
from laredo_kernel.tuples import UNCHANGED

from laredo_query.domain.errors import RowWithoutKey
from laredo_query.domain.keys import Key, KeySpec


class StoredRow:
    """One version of one row: its canonical key, typed values (read-only by convention) and the
    position of the change that wrote it. `wire` caches the row's serialized form for readers."""

    __slots__ = ("key", "values", "position", "wire")

    def __init__(self, key: Key, values: Mapping[str, Any], position: Position | None) -> None:
        self.key = key
        self.values = values
        self.position = position
        self.wire: bytes | None = None

    def __repr__(self) -> str:
        return f"StoredRow({self.key!r}, {self.values!r})"


RowEffect = CoreEffect[StoredRow]


class _StoreKey:
    """A KeySpec as the core's key rule: a row whose key value is absent or UNCHANGED cannot be placed."""

    __slots__ = ("spec", "fields")

    def __init__(self, spec: KeySpec) -> None:
        self.spec, self.fields = spec, spec.fields

    def has_all(self, partial: Mapping[str, Any]) -> bool:
        return self.spec.has_all(partial)

    def of_row(self, values: Mapping[str, Any]) -> Key:
        for field in self.fields:
            if values.get(field, UNCHANGED) is UNCHANGED:
                break
        else:
            return self.spec.of_row(values)
        missing = [f for f in self.fields if values.get(f, UNCHANGED) is UNCHANGED]
        raise RowWithoutKey(f"the row lacks the value of key column(s) {', '.join(missing)} (absent, or an "
                            f"unchanged TOASTed value with no old key sent; key: {', '.join(self.fields)}), so it "
                            "cannot be placed")


class RowStore:
    """Rows by primary key, plus the baseline generation being loaded."""

    def __init__(self, spec: KeySpec) -> None:
        self.spec = spec
        self._core: TableCore[StoredRow] = TableCore(_StoreKey(spec), StoredRow)

    def __len__(self) -> int:
        return len(self._core)

    def __contains__(self, key: Key) -> bool:
        return key in self._core

    def get(self, key: Key) -> StoredRow | None:
        return self._core.get(key)

    def rows(self) -> list[StoredRow]:
        """A point-in-time copy: later changes replace rows in the store, never in this list."""
        return self._core.rows()

    def keys(self) -> Iterable[Key]:
        return self._core.keys()

    @property
    def baseline_in_progress(self) -> bool:
        """Between a baseline's BEGIN and END (its generation is open)."""
        return self._core.baseline_in_progress

    def rekey(self, spec: KeySpec) -> None:
        """Key rows by another primary key (or another kind of key column); rows keep their values."""
        self.spec = spec
        self._core.rekey(_StoreKey(spec))

    def apply(self, change: RowChange) -> RowEffect | None:
        """Apply one streamed change; None when it changed nothing (e.g. a replay)."""
        return _as_seen_here(self._core.apply(change))

    def begin_baseline(self, baseline_id: str) -> None:
        """Start a baseline generation: rows it does not contain are removed at its end."""
        self._core.begin_baseline(baseline_id)

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect | None:
        return _as_seen_here(self._core.apply_baseline_row(baseline_id, change))

    def end_baseline(self, baseline_id: str) -> list[RowEffect]:
        """Remove every row the generation did not contain; one DELETE effect per removed row."""
        return self._core.end_baseline(baseline_id)

    def key_of(self, values: Mapping[str, Any]) -> Key:
        """The primary key of a row's values; RowWithoutKey when a key value is absent or UNCHANGED."""
        return self._core.key_of(values)

    def find_key(self, partial: Mapping[str, Any]) -> Key | None:
        """The key of the stored row an old tuple (key or full row) names, None if no row matches."""
        return self._core.find_key(partial)


def _as_seen_here(effect: RowEffect | None) -> RowEffect | None:
    if effect is None or effect.new is None:
        return effect
    action = Action.INSERT if effect.old is None else Action.UPDATE
    return effect if action is effect.action else RowEffect(action, effect.old, effect.new, effect.displaced)
