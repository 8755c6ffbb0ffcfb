"""Fan-out's rows of one table: the shared table core (laredo_kernel.encoded_rows) keyed by the primary-key
columns' values (the value itself for a one-column key), each row held as its SyncResponse SnapshotRow bytes
(ports.SyncEncoder.encode_row), which snapshots and journal entries splice without encoding them again. A
dead-letter replay decides by the rows' positions (laredo_core.deadletters.supersede), as query does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.encoded_rows import EncodedRow, EncodedTable, RowDecoder, RowEncoder
from laredo_kernel.table_core import RowEffect as CoreEffect
from laredo_kernel.table_core import ColumnsKey, MissingKeyValue
from laredo_kernel.tuples import UNCHANGED

from laredo_fanout.domain.errors import RowWithoutKey

#: A row's key: its key column's value, or the tuple of its key columns' values (see _Key).
RowKey = Any
#: One version of one row (its values: TableState.values_of(row)).
StoredRow = EncodedRow
RowEffect = CoreEffect[StoredRow]


class _Key(ColumnsKey):
    """The key rule of laredo_kernel.table_core.key_values, a one-column key as the value itself: a 1-tuple per
    row would cost 48 bytes."""

    __slots__ = ("_only",)

    def __init__(self, fields: tuple[str, ...]) -> None:
        super().__init__(fields, _refused)
        self._only = fields[0] if len(fields) == 1 else None

    def of_row(self, values: Mapping[str, Any]) -> RowKey:
        only = self._only
        if only is not None:  # the common case: one key column holding a number or a string
            value = values.get(only, UNCHANGED)
            if type(value) is int or type(value) is str:
                return value
        key = ColumnsKey.of_row(self, values)
        return key[0] if len(key) == 1 else key


def _refused(missing: MissingKeyValue) -> RowWithoutKey:
    return RowWithoutKey(f"{missing}; absent, or an unchanged TOASTed value sent without the old key, so it cannot "
                         "be placed; give the table a primary key (or REPLICA IDENTITY FULL) in the source, then "
                         "replay the dead letters or reload the table")


class TableState(EncodedTable):
    """Rows of one table by primary key, plus the baseline generation being loaded."""

    def __init__(self, key_columns: tuple[str, ...], encode: RowEncoder, decode: RowDecoder) -> None:
        super().__init__(_Key(key_columns), encode, decode)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.key_rule.fields

    def restore_rows(self, key_columns: tuple[str, ...], rows: Iterable[Mapping[str, Any]]) -> None:
        """Replace every row by `rows` (JSON-compatible values, e.g. from a snapshot); the caller sets
        `restored_position` to the snapshot's position."""
        self.restore_snapshot_rows(rows, _Key(key_columns))

    def rekey_columns(self, key_columns: tuple[str, ...]) -> None:
        """Switch to another primary key (schema change); rows keep their values."""
        if key_columns != self.key_columns:
            self.rekey(_Key(key_columns))
