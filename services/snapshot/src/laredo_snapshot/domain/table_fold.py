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
from laredo_kernel.table_core import TableCore
from laredo_kernel.table_replay import columns_to_adopt, replay

from laredo_snapshot.domain.records import Key, key_of


class _FoldRow:
    __slots__ = ("key", "values", "position")

    def __init__(self, key: Key, values: Mapping[str, Any], position: Position | None) -> None:
        self.key, self.values, self.position = key, values, position


class _FoldKey:
    """The key as fan-out reads it (records.key_of): the key columns' values, every column's without a key."""

    __slots__ = ("fields",)

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields

    def has_all(self, partial: Mapping[str, Any]) -> bool:
        return all(c in partial for c in self.fields)

    def of_row(self, values: Mapping[str, Any]) -> Key:
        return key_of(values, self.fields)


class TableFold:
    def __init__(self) -> None:
        self._core: TableCore[_FoldRow] = TableCore(_FoldKey(()), _FoldRow)
        self.columns: tuple[ColumnInfo, ...] = ()
        self.applied: Position | None = None
        self.stream_sequence = 0

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._core.key_rule.fields

    @property
    def rows(self) -> dict[Key, Mapping[str, Any]]:
        """The rows by key, as they stand."""
        return {row.key: row.values for row in self._core.rows()}

    @property
    def baseline_in_progress(self) -> bool:
        return self._core.baseline_in_progress

    def restore(self, columns: tuple[ColumnInfo, ...], key_columns: tuple[str, ...], position: Position,
                stream_sequence: int, rows: Iterable[dict[str, Any]]) -> None:
        """Start from a snapshot: its rows, columns, key, position and stream sequence."""
        self.columns = columns
        self._core = TableCore(_FoldKey(key_columns), _FoldRow)
        self._core.restore(rows, position)
        self.applied, self.stream_sequence = position, stream_sequence

    @property
    def applied_position(self) -> Position | None:
        return self.applied

    @applied_position.setter
    def applied_position(self, position: Position | None) -> None:
        self.applied = position

    def apply(self, sequence: int, batch: ChangeBatchInfo) -> None:
        """Apply one stream message of the table (JSON-compatible values)."""
        columns = columns_to_adopt(self, self.columns, batch)
        if columns is not None:
            self.columns = columns
            if batch.key_columns != self.key_columns:
                self._core.rekey(_FoldKey(batch.key_columns))
        replay(self._core, self, batch, _ignore)
        self.stream_sequence = sequence


def _ignore(_effect: object, _position: Position) -> None:
    return None
