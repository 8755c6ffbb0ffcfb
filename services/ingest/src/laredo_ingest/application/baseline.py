"""Publish a consistent baseline of some tables from one exported snapshot, with progress reporting."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from laredo_kernel.changes import TableId
from laredo_kernel.position import format_lsn

from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.status import BaselineProgress, IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.baseline import BaselineBatches
from laredo_ingest.domain.message_limits import MessageLimits
from laredo_ingest.domain.schema import TableSchema
from laredo_ingest.ports import Observer, SnapshotReader

log = logging.getLogger(__name__)

PROGRESS_LOG_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class BaselineJob:
    """One baseline: which tables, as of which snapshot, and what to tell consumers first."""

    options: IngestOptions  # source_id, subject_prefix, baseline_chunk_rows, baseline_ack_timeout
    baseline_id: str
    snapshot_lsn: int
    schemas: Sequence[TableSchema]
    row_filters: Mapping[TableId, str]
    #: stream.max_batch_bytes and the NATS server's max_payload: chunks are sized by bytes as well as rows.
    limits: MessageLimits
    resync_reason: str = ""  # non-empty: a RESYNC_REQUIRED message precedes each table's baseline


async def publish_baseline(reader: SnapshotReader, publisher: TrackedPublisher, observer: Observer,
                           status: IngestStatus, job: BaselineJob, *, expected_rows: int = 0) -> None:
    """Publish (RESYNC_REQUIRED,) BEGIN, row chunks and END per table, pipelined; return once JetStream
    acknowledged all of it."""
    progress = status.baseline = BaselineProgress(expected_rows=expected_rows, started_monotonic=time.monotonic(),
                                                  running=True)
    try:
        for schema in job.schemas:
            batches = BaselineBatches(source_id=job.options.source_id, subject_prefix=job.options.subject_prefix,
                                      baseline_id=job.baseline_id, snapshot_lsn=job.snapshot_lsn, schema=schema,
                                      chunk_rows=job.options.baseline_chunk_rows, limits=job.limits)
            attributes = {"laredo.table": str(schema.table), "laredo.baseline_id": job.baseline_id,
                          "laredo.snapshot_lsn": format_lsn(job.snapshot_lsn)}
            progress.table = str(schema.table)
            status.changed()  # each table's baseline start is reported at once
            with observer.span("ingest.baseline", attributes) as span:
                started = time.monotonic()
                headers = span.trace_headers()
                if job.resync_reason:
                    await publisher.publish(batches.resync_required(job.resync_reason), headers)
                await _publish_table(reader, publisher, batches, status, schema, job, headers)
                elapsed = max(time.monotonic() - started, 1e-6)
                span.set("laredo.rows", batches.rows)
            log.info("baseline of %s published: %d rows in %.2fs (%.0f rows/s)", schema.table, batches.rows,
                     elapsed, batches.rows / elapsed)
        await publisher.drain(job.options.baseline_ack_timeout)
    finally:
        progress.running = False
        status.changed()


async def _publish_table(reader: SnapshotReader, publisher: TrackedPublisher, batches: BaselineBatches,
                         status: IngestStatus, schema: TableSchema, job: BaselineJob,
                         headers: dict[str, str]) -> None:
    progress, last_log = status.baseline, time.monotonic()
    await publisher.publish(batches.begin(), headers)
    rows = reader.copy_rows(schema, job.row_filters.get(schema.table, ""), job.options.baseline_chunk_rows,
                            chunk_bytes=job.limits.max_batch_bytes)
    async with contextlib.aclosing(rows) as chunks:
        async for tuples in chunks:
            for batch in batches.add_rows(tuples):
                if batch.dead_letter_reason:
                    status.record_oversized(batch)
                await publisher.publish(batch, headers)
            status.baseline_rows += len(tuples)
            progress.rows += len(tuples)
            now = time.monotonic()
            if now - last_log >= PROGRESS_LOG_SECONDS:
                last_log = now
                eta = f", about {progress.eta_seconds:.0f}s left" if progress.eta_seconds else ""
                log.info("baseline of %s: %d rows so far (%d in all tables, %.0f rows/s%s)", schema.table,
                         batches.rows, progress.rows, progress.rows_per_second, eta)
    await publisher.publish(batches.end(), headers)
