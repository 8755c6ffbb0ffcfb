"""Wires one streaming session: assembler, spools, publisher bookkeeping, frame handler, slot monitor,
and the operator requests (re-baseline, pause) with their durable state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from laredo_kernel.changes import TableId
from laredo_kernel.position import format_lsn

from laredo_ingest.application.control import IngestControl
from laredo_ingest.application.frame_handler import FrameHandler
from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.rebaseline import rebaseline
from laredo_ingest.application.slot_monitor import SlotMonitor
from laredo_ingest.application.startup import PreparedSource, describe_published
from laredo_ingest.application.status import IngestStatus
from laredo_ingest.application.streamer import StreamingSession
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.application.transaction_spool import SpillingSpool
from laredo_ingest.domain.baseline_reason import BaselineCause, BaselineReason
from laredo_ingest.domain.pgoutput import Relation
from laredo_ingest.domain.start_plan import IngestState
from laredo_ingest.domain.streamed import StreamedTransactions
from laredo_ingest.domain.transaction import TransactionAssembler
from laredo_ingest.ports import IngestPorts, ReplicationStream, SourceDatabase

log = logging.getLogger(__name__)

RecordState = Callable[..., Awaitable[None]]


class SessionFactory:
    def __init__(self, options: IngestOptions, ports: IngestPorts, status: IngestStatus, control: IngestControl,
                 record_state: RecordState) -> None:
        self._options = options
        self._ports = ports
        self._status = status
        self._control = control
        self._record_state = record_state

    async def run(self, db: SourceDatabase, stream: ReplicationStream, prepared: PreparedSource, start_lsn: int,
                  state: IngestState, stop: asyncio.Event) -> object | None:
        """START_REPLICATION, then the session until it ends; returns the RESET request that ended it (None: it
        ended otherwise). The spools die with the session."""
        o = self._options
        session, streamed = self._build(db, stream, prepared, start_lsn, state)
        streaming = o.stream_in_progress and o.protocol_version >= 2
        await stream.start(o.slot_name, start_lsn, o.publication_name, protocol_version=o.protocol_version,
                           streaming=streaming)
        log.info("streaming slot %s from %s (pgoutput proto_version %d%s)", o.slot_name, format_lsn(start_lsn),
                 o.protocol_version, ", streaming in-progress transactions" if streaming else "")
        try:
            await session.run(stop)
        finally:
            streamed.close()
        return session.reset_request

    def _build(self, db: SourceDatabase, stream: ReplicationStream, prepared: PreparedSource, start_lsn: int,
               state: IngestState) -> tuple[StreamingSession, StreamedTransactions]:
        o, status = self._options, self._status
        assembler = TransactionAssembler(o.source_id, o.subject_prefix, prepared.schemas,
                                         max_changes=o.max_batch_changes, max_bytes=o.max_batch_bytes,
                                         max_payload=prepared.limits.max_payload,
                                         on_oversized=status.record_oversized)
        publisher = TrackedPublisher(self._ports.publisher, start_lsn, status)
        streamed = StreamedTransactions(lambda: SpillingSpool(o.spool_memory, o.spool_dir or None))

        async def refresh_catalog(relation: Relation) -> None:
            table = TableId(relation.namespace, relation.name)
            schemas, _ = await describe_published(db, o, [table])
            assembler.update_catalog(schemas[table])

        async def reply_now() -> None:  # `session` is built below, before any frame is handled
            await session.send_status()

        async def run_rebaseline(tables: frozenset[TableId], reason: BaselineReason) -> dict[TableId, int]:
            targets = tuple(sorted(tables, key=str)) if tables else prepared.tables
            snapshots = await rebaseline(
                targets, reason, options=o, limits=prepared.limits, database=self._ports.database(),
                helper=self._ports.replication(), publisher=publisher, observer=self._ports.observer, status=status,
                record_reload=lambda t: self._record_state(reload_tables=tuple(map(str, t))))
            await self._record_state(baselines=tuple(status.baselines.values()))
            return snapshots

        def on_schema_change(table: TableId) -> None:
            log.info("the columns of %s changed: re-baselining it (existing rows may hold new defaults or "
                     "converted values that the stream does not carry)", table)
            self._control.submit_detached_reload([table], BaselineReason(
                BaselineCause.SCHEMA_CHANGE, f"the columns of {table} changed"))

        handler = FrameHandler(assembler, publisher, streamed, self._ports.observer, status,
                               refresh_catalog=refresh_catalog, reply_now=reply_now,
                               on_schema_change=on_schema_change if o.rebaseline_on_schema_change else None)
        monitor = SlotMonitor(db, status, o) if o.slot_check_interval else None
        session = StreamingSession(stream, publisher, handler, status, self._control, o, rebaseline=run_rebaseline,
                                   record_pause=lambda paused: self._record_state(paused=paused),
                                   monitor=monitor, skip_before=assembler.skip_before, paused=state.paused)
        if state.reload_tables:
            tables = [TableId.parse(t) for t in state.reload_tables]
            log.info("re-baseline of %s was requested and did not complete; doing it now",
                     ", ".join(state.reload_tables))
            self._control.submit_detached_reload(tables, BaselineReason(
                BaselineCause.UNFINISHED_RELOAD, "a re-baseline an earlier session did not finish, redone"))
        return session, streamed
