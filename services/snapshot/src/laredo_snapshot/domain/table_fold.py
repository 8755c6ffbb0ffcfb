"""The sequential fold: a table's rows after each stream message, applied one after another as fan-out does.

The specification of the fold (the key-by-key fold must give the same rows; the shared spec tests check it),
and the fold of last resort for tails the key-by-key fold cannot do exactly (a changed primary key, changes
naming rows by other columns). The rows follow the shared table core (laredo_kernel.table_core), as fan-out's
and query's do; around it, as the fan-out replicator does:
- positions are the idempotency key: a change at or before the applied position is skipped;
- every message's columns are adopted when they differ and the message brings news; a new key re-keys rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.changes import BatchKind, ChangeBatchInfo, ColumnInfo
from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position
from laredo_kernel.table_core import TableCore

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

    def apply(self, sequence: int, batch: ChangeBatchInfo) -> None:
        """Apply one stream message of the table (JSON-compatible values)."""
        self._adopt_columns(batch)
        kind = batch.kind
        if kind is BatchKind.TRANSACTION or kind is BatchKind.BASELINE_ROWS:
            for change in batch.changes:
                if self._accepts(change.position):
                    if kind is BatchKind.BASELINE_ROWS:
                        self._core.apply_baseline_row(batch.baseline_id, change)
                    else:
                        self._core.apply(change)
                    self.applied = change.position
        elif kind is BatchKind.BASELINE_BEGIN:
            begin = batch.position(BASELINE_ORDINAL_BASE - 1)
            if self._accepts(begin):
                self._core.begin_baseline(batch.baseline_id)
                self.applied = begin
        elif kind is BatchKind.BASELINE_END:
            end = batch.position(-1)
            if self._accepts(end):
                self._core.end_baseline(batch.baseline_id)
                self.applied = end
        self.stream_sequence = sequence

    def _accepts(self, position: Position) -> bool:
        applied = self.applied
        return applied is None or position > applied

    def _has_news(self, batch: ChangeBatchInfo) -> bool:
        if batch.changes:
            return self._accepts(batch.changes[-1].position)
        return batch.commit_lsn == 0 or self._accepts(batch.position(BASELINE_ORDINAL_BASE - 1))

    def _adopt_columns(self, batch: ChangeBatchInfo) -> None:
        if not batch.columns or batch.columns == self.columns or not self._has_news(batch):
            return
        self.columns = batch.columns
        if batch.key_columns != self.key_columns:
            self._core.rekey(_FoldKey(batch.key_columns))
