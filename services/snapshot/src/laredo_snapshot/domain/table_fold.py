"""The sequential fold: a table's rows after each stream message, applied one after another as fan-out does.

The specification of the fold (the key-by-key fold must give the same rows; the shared spec tests check it),
and the fold of last resort for tails the key-by-key fold cannot do exactly (a changed primary key, changes
naming rows by other columns). It follows the fan-out replicator and table state rule by rule:
- positions are the idempotency key: a change at or before the applied position is skipped;
- every message's columns are adopted when they differ and the message brings news; a new key re-keys rows;
- TRUNCATE empties the table; DELETE removes the row its old key (or old row) names;
- INSERT/UPDATE replace the row at the new key, taking unchanged TOASTed values from the stored row; an
  UPDATE whose old key differs moves the row;
- a baseline generation (BEGIN, rows, END) removes at its END every row it did not contain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, ColumnInfo, RowChange
from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position
from laredo_kernel.rows import merge_unchanged, values_match

from laredo_snapshot.domain.records import Key, key_of


class TableFold:
    def __init__(self) -> None:
        self.rows: dict[Key, dict[str, Any]] = {}
        self.key_columns: tuple[str, ...] = ()
        self.columns: tuple[ColumnInfo, ...] = ()
        self.applied: Position | None = None
        self.stream_sequence = 0
        self._baseline_id: str | None = None
        self._seen: set[Key] = set()

    @property
    def baseline_in_progress(self) -> bool:
        return self._baseline_id is not None

    def restore(self, columns: tuple[ColumnInfo, ...], key_columns: tuple[str, ...], position: Position,
                stream_sequence: int, rows: Iterable[dict[str, Any]]) -> None:
        """Start from a snapshot: its rows, columns, key, position and stream sequence."""
        self.key_columns, self.columns = key_columns, columns
        self.rows = {key_of(values, key_columns): values for values in rows}
        self.applied, self.stream_sequence = position, stream_sequence
        self._baseline_id, self._seen = None, set()

    def apply(self, sequence: int, batch: ChangeBatchInfo) -> None:
        """Apply one stream message of the table (JSON-compatible values)."""
        self._adopt_columns(batch)
        kind = batch.kind
        if kind is BatchKind.TRANSACTION or kind is BatchKind.BASELINE_ROWS:
            for change in batch.changes:
                if self._accepts(change.position):
                    self._apply_change(change, batch)
                    self.applied = change.position
        elif kind is BatchKind.BASELINE_BEGIN:
            begin = batch.position(BASELINE_ORDINAL_BASE - 1)
            if self._accepts(begin):
                self._baseline_id, self._seen = batch.baseline_id, set()
                self.applied = begin
        elif kind is BatchKind.BASELINE_END:
            end = batch.position(-1)
            if self._accepts(end):
                self._end_baseline(batch.baseline_id)
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
        key = batch.key_columns
        if key != self.key_columns:
            self.key_columns = key
            self.rows = {key_of(values, key): values for values in self.rows.values()}
            self._seen = set()

    def _apply_change(self, change: RowChange, batch: ChangeBatchInfo) -> None:
        if batch.kind is BatchKind.BASELINE_ROWS:
            if batch.baseline_id != self._baseline_id:  # rows of a generation whose BEGIN was not seen
                self._baseline_id, self._seen = batch.baseline_id, set()
            self._seen.add(self._put(change.new or {}, None))
        elif change.action is Action.TRUNCATE:
            self.rows = {}
        elif change.action is Action.DELETE:
            key = self._find_key(change.old or {})
            if key is not None:
                self.rows.pop(key, None)
        else:
            self._put(change.new or {}, self._find_key(change.old) if change.old else None)

    def _put(self, new_values: Mapping[str, Any], old_key: Key | None) -> Key:
        key = key_of(new_values, self.key_columns)
        source_key = key if old_key is None else old_key
        previous = self.rows.get(source_key)
        moves = source_key != key and previous is not None
        if source_key != key and previous is None:
            previous = self.rows.get(key)  # a replayed move: the row already sits at its new key
        if moves:
            del self.rows[source_key]
        self.rows[key] = merge_unchanged(new_values, previous)
        return key

    def _end_baseline(self, baseline_id: str) -> None:
        seen = self._seen if baseline_id == self._baseline_id else set()
        self.rows = {key: values for key, values in self.rows.items() if key in seen}
        self._baseline_id, self._seen = None, set()

    def _find_key(self, partial: Mapping[str, Any]) -> Key | None:
        """The key of the row an old tuple names; a scan when it holds other columns than the key."""
        if all(c in partial for c in self.key_columns):
            return key_of(partial, self.key_columns)
        for key, values in self.rows.items():
            if values_match(values, partial.items()):
                return key
        return None
