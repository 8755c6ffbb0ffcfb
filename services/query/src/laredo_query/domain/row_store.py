"""Query's rows of one table: the shared table core (laredo_kernel.table_core), keyed by canonical primary key.

Invariants (besides the core's):
- a stored row version is never mutated, its cached wire form aside;
- an effect's action says what happened to this copy: a put is an INSERT when no row was there before, else
  an UPDATE (a baseline row replacing a stored one too), whatever the change called itself.
"""

from __future__ import annotations

from collections.abc import Mapping
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


class RowStore(TableCore[StoredRow]):
    """Rows by primary key, plus the baseline generation being loaded."""

    def __init__(self, spec: KeySpec) -> None:
        super().__init__(_StoreKey(spec), StoredRow)
        self.spec = spec

    def rekey_spec(self, spec: KeySpec) -> None:
        """Key rows by another primary key (or another kind of key column); rows keep their values."""
        self.spec = spec
        self.rekey(_StoreKey(spec))

    def apply(self, change: RowChange) -> RowEffect | None:
        """Apply one streamed change; None when it changed nothing (e.g. a replay)."""
        return _as_seen_here(super().apply(change))

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> RowEffect | None:
        return _as_seen_here(super().apply_baseline_row(baseline_id, change))


def _as_seen_here(effect: RowEffect | None) -> RowEffect | None:
    if effect is None or effect.new is None:
        return effect
    action = Action.INSERT if effect.old is None else Action.UPDATE
    return effect if action is effect.action else RowEffect(action, effect.old, effect.new, effect.displaced)
