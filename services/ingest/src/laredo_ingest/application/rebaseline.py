"""On-demand re-baseline of some tables while streaming, without losing or reordering a change.

How (reading of the main slot is held for the whole procedure, so the main stream stands at a position
P whose transactions are all published):
1. A second walsender connection creates a temporary helper slot with EXPORT_SNAPSHOT. Its consistent
   point L is after P (the slot is created after P was read), and the exported snapshot S contains
   exactly the transactions whose commit record lies before L.
2. Under S the tables are copied and published as BASELINE_BEGIN / ROWS / END at snapshot LSN L (row
   positions (L, BASELINE_ORDINAL_BASE + i)); the helper slot is dropped with its connection.
3. Streaming resumes at P with skip_before(table, L): the table's changes in transactions committed
   before L are already in the baseline and are dropped; the others are published as usual.

Invariant, per table subject: changes with commit LSN < P, then the baseline rows (positions (L, base+i)),
then only changes with commit LSN >= L (positions (L', n >= 0), L' >= L). Positions strictly increase, so
consumers that skip what they already applied apply everything, and BASELINE_END removes the rows that
disappeared since their last baseline. A crash in between leaves the request in the ingest state
(reload_tables): the next session takes a new helper slot at L2 > L and starts over, which is safe
because a baseline generation can follow a partial one.
Cost: the main stream is held while the tables are copied; other tables' changes wait (lag grows).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from laredo_kernel.changes import TableId
from laredo_kernel.position import format_lsn

from laredo_ingest.application.baseline import BaselineJob, publish_baseline
from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.startup import describe_published
from laredo_ingest.application.status import IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.baseline import make_baseline_id
from laredo_ingest.domain.baseline_reason import BaselineReason
from laredo_ingest.domain.errors import IngestError, TableWithoutKey
from laredo_ingest.domain.message_limits import MessageLimits
from laredo_ingest.domain.prerequisites import refuse_unsafe_tables
from laredo_ingest.ports import Observer, ReplicationStream, SourceDatabase

log = logging.getLogger(__name__)

RecordReload = Callable[[tuple[TableId, ...]], Awaitable[None]]


async def rebaseline(tables: Sequence[TableId], reason: BaselineReason, *, options: IngestOptions,
                     database: SourceDatabase, helper: ReplicationStream, publisher: TrackedPublisher,
                     observer: Observer, status: IngestStatus, record_reload: RecordReload,
                     limits: MessageLimits) -> dict[TableId, int]:
    """Re-baseline `tables` for `reason` (the status shows it; see the module docstring); returns the snapshot
    LSN per table. A table refused at start-up (or unsafe to publish since) is refused here too, before
    anything is recorded."""
    unknown = sorted(str(t) for t in tables if t not in options.tables)
    if unknown:
        raise IngestError(f"cannot re-baseline {', '.join(unknown)}: not a configured table of source "
                          f"{options.source_id} (configured: {', '.join(map(str, options.tables))})")
    try:
        await database.open()
        refused = refuse_unsafe_tables(await database.describe_tables(tables), options.published,
                                       publication=options.publication_name)
        if refused:
            raise TableWithoutKey(f"cannot re-baseline {', '.join(map(str, refused))}: {'; '.join(refused.values())}")
        await record_reload(tuple(tables))  # a crash from here on redoes the re-baseline
        await helper.open()
        created = await helper.create_slot(options.reload_slot_name, temporary=True)
        async with database.snapshot(created.snapshot_name) as reader:
            schemas, row_filters = await describe_published(database, options, tables)
            baseline_id = make_baseline_id(created.consistent_lsn, int(time.time() * 1000))
            log.info("re-baselining %s at %s (baseline %s)", ", ".join(map(str, tables)),
                     format_lsn(created.consistent_lsn), baseline_id)
            status.record_baseline(map(str, tables), reason, baseline_id)
            job = BaselineJob(options, baseline_id, created.consistent_lsn, [schemas[t] for t in tables],
                              row_filters, limits)
            expected = sum((await database.row_estimates(tables)).values())
            await publish_baseline(reader, publisher, observer, status, job, expected_rows=expected)
    finally:
        await helper.close()  # drops the temporary helper slot
        await database.close()
    await record_reload(())
    log.info("re-baseline of %s complete at %s", ", ".join(map(str, tables)), format_lsn(created.consistent_lsn))
    return {t: created.consistent_lsn for t in tables}
