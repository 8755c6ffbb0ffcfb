"""Query's rows of one table: the shared table core (laredo_kernel.encoded_rows) keyed by canonical primary key,
each row held as its google.protobuf.Struct bytes (laredo_kernel.struct_wire), which Lookup, GetRow, ListRows and
Subscribe send as they are. An effect's action says what happened to this copy: a put is an INSERT when no row
was there before, else an UPDATE (a baseline row replacing a stored one too), whatever the change called itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.encoded_rows import EncodedRow, EncodedTable
from laredo_kernel.struct_wire import ROW_VALUES, struct_fields
from laredo_kernel.table_core import RowEffect as CoreEffect
from laredo_kernel.tuples import UNCHANGED

from laredo_query.domain.errors import RowWithoutKey
from laredo_query.domain.keys import Key, KeySpec

def row_values(encoded: bytes) -> dict[str, Any]:
    """The JSON-compatible values of a row's Struct bytes."""
    return ROW_VALUES.decode(encoded, 0, len(encoded))


class StoredRow(EncodedRow):
    """One version of one row: its canonical key, its Struct bytes (`encoded`) and the position of the change
    that wrote it."""

    __slots__ = ()

    @property
    def values(self) -> dict[str, Any]:
        """Its JSON-compatible values, decoded afresh (RowStore.values_of keeps the recently read ones)."""
        return row_values(self.encoded)


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


class RowStore(EncodedTable):
    """Rows by primary key, plus the baseline generation being loaded."""

    def __init__(self, spec: KeySpec) -> None:
        super().__init__(_StoreKey(spec), struct_fields, row_values, StoredRow, read_new_rows=True)
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
