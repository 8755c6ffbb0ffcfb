"""Baseline messages of one table: BASELINE_BEGIN, BASELINE_ROWS chunks, BASELINE_END.

Every message of one table's baseline shares baseline_id and carries commit_lsn = the snapshot's
consistent point; row i has ordinal BASELINE_ORDINAL_BASE + i, so baseline rows sort before every
change streamed after the snapshot. Chunks count across the three kinds: begin is chunk 0.

Row chunks are bounded by rows (baseline.chunk_rows), by bytes (stream.max_batch_bytes) and by the
transport's max_payload (message_limits.py): wide rows make more, smaller messages. A row too large to
publish even alone becomes a dead letter instead (its ordinal is used up), so one huge row never stops the
baseline; BASELINE_END counts the rows published on the table's subject.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence

from laredo_kernel.changes import Action, BatchKind
from laredo_kernel.position import BASELINE_ORDINAL_BASE
from laredo_core.stream.naming import baseline_msg_id, control_msg_id, deadletter_subject, table_subject

from laredo_ingest.domain.batches import CHANGE_OVERHEAD_BYTES, ChangeRecord, OutboundBatch
from laredo_ingest.domain.message_limits import MessageLimits, OversizedMessage, oversized_dead_letter
from laredo_ingest.domain.schema import TableSchema


def make_baseline_id(snapshot_lsn: int, start_unix_ms: int) -> str:
    return f"{snapshot_lsn:X}-{start_unix_ms}"


async def chunk_tuples(tuples: AsyncIterable[bytes], chunk_rows: int, chunk_bytes: int) -> AsyncIterator[list[bytes]]:
    """Copied rows in chunks of up to chunk_rows; a chunk also ends once its tuples reach chunk_bytes (0: no bound)."""
    chunk: list[bytes] = []
    size = 0
    async for t in tuples:
        chunk.append(t)
        size += len(t)
        if len(chunk) >= chunk_rows or 0 < chunk_bytes <= size:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class BaselineBatches:
    """Builds the messages of one table's baseline, in order."""

    def __init__(self, *, source_id: str, subject_prefix: str, baseline_id: str, snapshot_lsn: int,
                 schema: TableSchema, chunk_rows: int = 2000, limits: MessageLimits | None = None) -> None:
        self._source_id = source_id
        self._baseline_id = baseline_id
        self._lsn = snapshot_lsn
        self._schema = schema
        make_subject = table_subject if schema.has_usable_key else deadletter_subject
        self._subject = make_subject(subject_prefix, source_id, schema.table)
        self._chunk = 0
        self._chunk_rows = max(chunk_rows, 1)
        self._limits = limits or MessageLimits(1 << 62)
        self._table_limits = self._limits.for_table(schema)
        self._oversized = OversizedMessage(source_id, subject_prefix, BatchKind.BASELINE_ROWS, snapshot_lsn,
                                           baseline_id=baseline_id)
        self.rows = 0  # rows read, the dead-lettered ones included (they use up ordinals)
        self.published_rows = 0  # rows on the table's subject
        self.oversized_rows = 0

    def resync_required(self, reason: str) -> OutboundBatch:
        """Tells consumers the table may be stale until this baseline ends (continuity was lost)."""
        return OutboundBatch(
            subject=self._subject,
            msg_id=control_msg_id(self._source_id, "resync", self._lsn, self._schema.table, self._baseline_id),
            source_id=self._source_id, kind=BatchKind.RESYNC_REQUIRED, schema=self._schema, commit_lsn=self._lsn,
            baseline_id=self._baseline_id, reason=reason)

    def begin(self) -> OutboundBatch:
        return self._batch(BatchKind.BASELINE_BEGIN, [])

    def add_rows(self, tuples: Sequence[bytes]) -> list[OutboundBatch]:
        """BASELINE_ROWS messages of the next rows, split by rows and bytes; dead letters for rows too large."""
        limits, max_rows = self._table_limits, self._chunk_rows
        out: list[OutboundBatch] = []
        changes: list[ChangeRecord] = []
        total = 0
        for t in tuples:
            change = ChangeRecord(Action.INSERT, BASELINE_ORDINAL_BASE + self.rows, b"", t)
            self.rows += 1
            size = len(t) + CHANGE_OVERHEAD_BYTES
            if limits.oversized(size):
                self.oversized_rows += 1
                out.append(oversized_dead_letter(self._oversized, self._schema, change, self._limits))
                continue
            if changes and (len(changes) >= max_rows or limits.overflows(len(changes), total, size)):
                out.append(self._rows(changes))
                changes, total = [], 0
            changes.append(change)
            total += size
        if changes:
            out.append(self._rows(changes))
        return out

    def end(self) -> OutboundBatch:
        return self._batch(BatchKind.BASELINE_END, [], last_chunk=True, row_count=self.published_rows)

    def _rows(self, changes: list[ChangeRecord]) -> OutboundBatch:
        self.published_rows += len(changes)
        return self._batch(BatchKind.BASELINE_ROWS, changes)

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
