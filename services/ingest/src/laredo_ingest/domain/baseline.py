"""Baseline messages of one table: BASELINE_BEGIN, BASELINE_ROWS chunks, BASELINE_END.

Every message of one table's baseline shares baseline_id and carries commit_lsn = the snapshot's
consistent point; row i has ordinal BASELINE_ORDINAL_BASE + i, so baseline rows sort before every
change streamed after the snapshot. Chunks count across the three kinds: begin is chunk 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from laredo_core.changes import Action, BatchKind
from laredo_core.position import BASELINE_ORDINAL_BASE
from laredo_core.stream.naming import baseline_msg_id, control_msg_id, deadletter_subject, table_subject

from laredo_ingest.domain.batches import ChangeRecord, OutboundBatch
from laredo_ingest.domain.schema import TableSchema


def make_baseline_id(snapshot_lsn: int, start_unix_ms: int) -> str:
    return f"{snapshot_lsn:X}-{start_unix_ms}"


class BaselineBatches:
    """Builds the messages of one table's baseline, in order."""

    def __init__(self, *, source_id: str, subject_prefix: str, baseline_id: str, snapshot_lsn: int,
                 schema: TableSchema) -> None:
        self._source_id = source_id
        self._baseline_id = baseline_id
        self._lsn = snapshot_lsn
        self._schema = schema
        make_subject = table_subject if schema.has_usable_key else deadletter_subject
        self._subject = make_subject(subject_prefix, source_id, schema.table)
        self._chunk = 0
        self.rows = 0

    def resync_required(self, reason: str) -> OutboundBatch:
        """Tells consumers the table may be stale until this baseline ends (continuity was lost)."""
        return OutboundBatch(
            subject=self._subject,
            msg_id=control_msg_id(self._source_id, "resync", self._lsn, self._schema.table, self._baseline_id),
            source_id=self._source_id, kind=BatchKind.RESYNC_REQUIRED, schema=self._schema, commit_lsn=self._lsn,
            baseline_id=self._baseline_id, reason=reason)

    def begin(self) -> OutboundBatch:
        return self._batch(BatchKind.BASELINE_BEGIN, [])

    def add_rows(self, tuples: Sequence[bytes]) -> OutboundBatch:
        first = BASELINE_ORDINAL_BASE + self.rows
        changes = [ChangeRecord(Action.INSERT, first + i, b"", t) for i, t in enumerate(tuples)]
        self.rows += len(tuples)
        return self._batch(BatchKind.BASELINE_ROWS, changes)

    def end(self) -> OutboundBatch:
        return self._batch(BatchKind.BASELINE_END, [], last_chunk=True, row_count=self.rows)

    def _batch(self, kind: BatchKind, changes: list[ChangeRecord], *, last_chunk: bool = False,
               row_count: int = 0) -> OutboundBatch:
        chunk = self._chunk
        self._chunk += 1
        return OutboundBatch(
            subject=self._subject,
            msg_id=baseline_msg_id(self._source_id, self._baseline_id, self._schema.table, chunk),
            source_id=self._source_id,
            kind=kind,
            schema=self._schema,
            commit_lsn=self._lsn,
            chunk=chunk,
            last_chunk=last_chunk,
            changes=changes,
            baseline_id=self._baseline_id,
            baseline_row_count=row_count,
        )
