"""The sequential fold: a table's rows after each stream message, applied one after another as fan-out does.

The specification of the fold (the key-by-key fold must give the same rows; the shared spec tests check it),
and the fold of last resort for tails the key-by-key fold cannot do exactly (a changed primary key, changes
naming rows by other columns). Messages are applied with the rules fan-out applies them with
(laredo_kernel.table_replay) to rows kept by the shared table core (laredo_kernel.table_core).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.changes import ChangeBatchInfo, ColumnInfo
from laredo_kernel.position import Position
from laredo_kernel.table_core import ColumnsKey, PlainRow, TableCore
from laredo_kernel.table_replay import columns_to_adopt, replay

from laredo_snapshot.domain.records import Key


class _Keyless(Exception):
    """A change whose row lacks a key value: fan-out keeps it as a dead letter and goes on; so does the fold."""


def _key(columns: tuple[str, ...]) -> ColumnsKey:
    return ColumnsKey(columns, _Keyless)  # the MissingKeyValue's message, as a _Keyless


class TableFold:
    def __init__(self) -> None:
        self._core: TableCore[PlainRow] = TableCore(_key(()), PlainRow)
        self.columns: tuple[ColumnInfo, ...] = ()
        self.applied_position: Position | None = None
        self.stream_sequence = 0
        self.keyless = 0  # changes skipped for a missing key value (fan-out's dead letters)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._core.key_rule.fields

    @property
    def rows(self) -> dict[Key, Mapping[str, Any]]:
        """The rows by key, as they stand (a copy)."""
        return {row.key: row.values for row in self._core.rows()}

    def row_values(self) -> list[Any]:
        """The rows' values (the dicts the stream and snapshots carry), as they stand."""
        return [row.values for row in self._core.rows()]

    def restore(self, columns: tuple[ColumnInfo, ...], key_columns: tuple[str, ...], position: Position,
                stream_sequence: int, rows: Iterable[dict[str, Any]]) -> None:
        """Start from a snapshot: its rows, columns, key, position and stream sequence."""
        self.columns = columns
        self._core.restore(rows, position, _key(key_columns))
        self.applied_position, self.stream_sequence = position, stream_sequence

    def apply(self, sequence: int, batch: ChangeBatchInfo) -> None:
        """Apply one stream message of the table (JSON-compatible values)."""
        columns = columns_to_adopt(self, self.columns, batch)
        if columns is not None:
            self.columns = columns
            if batch.key_columns != self.key_columns:
                self._core.rekey(_key(batch.key_columns))
        replay(self._core, self, batch, lambda _effect, _position: None, refused=(_Keyless,),
               on_refused=self._count_keyless)
        self.stream_sequence = sequence

    def _count_keyless(self, _index: int, _error: Exception) -> None:
        self.keyless += 1
