"""Publish a consistent baseline of every configured table from one exported snapshot."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from laredo_core.position import format_lsn

from laredo_ingest.application.status import IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.baseline import BaselineBatches
from laredo_ingest.domain.schema import TableSchema
from laredo_ingest.ports import Observer, SnapshotReader

log = logging.getLogger(__name__)

PROGRESS_LOG_SECONDS = 10.0


async def publish_baseline(reader: SnapshotReader, publisher: TrackedPublisher, observer: Observer,
                           status: IngestStatus, *, source_id: str, subject_prefix: str, baseline_id: str,
                           snapshot_lsn: int, schemas: Sequence[TableSchema], chunk_rows: int,
                           ack_timeout: float) -> None:
    """Publish BEGIN, row chunks and END per table, pipelined; return once JetStream acknowledged all."""
    for schema in schemas:
        batches = BaselineBatches(source_id=source_id, subject_prefix=subject_prefix, baseline_id=baseline_id,
                                  snapshot_lsn=snapshot_lsn, schema=schema)
        attributes = {"laredo.table": str(schema.table), "laredo.baseline_id": baseline_id,
                      "laredo.snapshot_lsn": format_lsn(snapshot_lsn)}
        with observer.span("ingest.baseline", attributes) as span:
            started = time.monotonic()
            await _publish_table(reader, publisher, batches, status, schema, chunk_rows, span.trace_headers())
            elapsed = max(time.monotonic() - started, 1e-6)
            span.set("laredo.rows", batches.rows)
        log.info("baseline of %s published: %d rows in %.2fs (%.0f rows/s)", schema.table, batches.rows,
                 elapsed, batches.rows / elapsed)
    await publisher.drain(ack_timeout)


async def _publish_table(reader: SnapshotReader, publisher: TrackedPublisher, batches: BaselineBatches,
                         status: IngestStatus, schema: TableSchema, chunk_rows: int,
                         headers: dict[str, str]) -> None:
    started = last_log = time.monotonic()
    await publisher.publish(batches.begin(), headers)
    async with contextlib.aclosing(reader.copy_rows(schema.table, chunk_rows)) as chunks:
        async for tuples in chunks:
            await publisher.publish(batches.add_rows(tuples), headers)
            status.baseline_rows += len(tuples)
            now = time.monotonic()
            if now - last_log >= PROGRESS_LOG_SECONDS:
                last_log = now
                log.info("baseline of %s: %d rows so far (%.0f rows/s)", schema.table, batches.rows,
                         batches.rows / (now - started))
    await publisher.publish(batches.end(), headers)
