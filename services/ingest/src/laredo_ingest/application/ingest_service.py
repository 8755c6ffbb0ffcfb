"""The ingest use case: start (resume or baseline), stream, and on a retryable failure start over from the slot.

Every attempt runs the whole start-up, so a lost connection, a failed publish or a crash all recover the
same way: the slot (stateful) or a new baseline (ephemeral, or an unfinished baseline) decides where the
stream continues, and JetStream drops whatever is published twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from laredo_core.changes import TableId
from laredo_core.errors import LaredoError
from laredo_core.position import format_lsn

from laredo_ingest.application.baseline import publish_baseline
from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.startup import check_slot_free, prepare_source
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.application.streamer import StreamingSession
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.backoff import Backoff
from laredo_ingest.domain.baseline import make_baseline_id
from laredo_ingest.domain.schema import TableSchema
from laredo_ingest.domain.start_plan import IngestState, SlotMode, StartKind, plan_start
from laredo_ingest.domain.transaction import TransactionAssembler
from laredo_ingest.ports import (
    ChangePublisher,
    Observer,
    ReplicationStream,
    SourceDatabase,
    StateStore,
    SystemIdentity,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class IngestPorts:
    database: Callable[[], SourceDatabase]  # a new, unopened connection per attempt
    replication: Callable[[], ReplicationStream]
    publisher: ChangePublisher
    state: StateStore
    observer: Observer


class IngestService:
    def __init__(self, options: IngestOptions, ports: IngestPorts, status: IngestStatus) -> None:
        self._options = options
        self._ports = ports
        self.status = status

    async def run(self, stop: asyncio.Event) -> None:
        """Run attempts until `stop` is set; raise a non-retryable error, or the last one when attempts run out."""
        o = self._options
        backoff = Backoff(o.reconnect_initial, o.reconnect_max, o.reconnect_multiplier, o.reconnect_max_attempts)
        while not stop.is_set():
            confirmed_before = self.status.confirmed_lsn
            try:
                await self._attempt(stop)
            except LaredoError as exc:
                if self.status.confirmed_lsn != confirmed_before:
                    backoff.reset()  # the attempt made progress: this is a new incident
                delay = backoff.next_delay()
                if not exc.retryable or backoff.exhausted:
                    self.status.phase, self.status.last_error = IngestPhase.FAILED, str(exc)
                    raise
                await self._wait_before_retry(stop, delay, backoff.failures, exc)
        self.status.phase = IngestPhase.STOPPED

    async def _wait_before_retry(self, stop: asyncio.Event, delay: float, attempt: int, exc: LaredoError) -> None:
        self.status.phase, self.status.last_error = IngestPhase.RECONNECTING, str(exc)
        self.status.restarts += 1
        log.warning("source %s: %s; restarting in %.1fs (failure %d in a row)", self._options.source_id, exc,
                    delay, attempt)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()

    async def _attempt(self, stop: asyncio.Event) -> None:
        o, ports = self._options, self._ports
        self.status.phase = IngestPhase.STARTING
        db, stream = ports.database(), ports.replication()
        try:
            await db.open()
            schemas = await prepare_source(db, o)
            identity = await stream.open()
            await ports.publisher.ensure_stream(o.stream_spec())
            start_lsn = await _unless_stopped(self._resume_or_baseline(db, stream, identity, schemas), stop)
            await db.close()  # not needed while streaming
            if start_lsn is None:
                return  # stopped during start-up or baseline: an unfinished baseline is redone next time
            await self._stream(stream, schemas, start_lsn, stop)
        finally:
            await stream.close()
            await db.close()

    async def _resume_or_baseline(self, db: SourceDatabase, stream: ReplicationStream, identity: SystemIdentity,
                                  schemas: Mapping[TableId, TableSchema]) -> int:
        o = self._options
        slot = await db.slot(o.slot_name)
        check_slot_free(slot)
        state = await self._ports.state.get(o.source_id) if o.slot_mode is SlotMode.STATEFUL else None
        plan = plan_start(mode=o.slot_mode, slot_name=o.slot_name, database=identity.database, slot=slot,
                          state=state, system_identifier=identity.system_identifier, tables=o.tables,
                          always_baseline=o.always_baseline)
        if plan.kind is StartKind.RESUME and slot is not None:
            log.info("resuming slot %s at %s: %s", o.slot_name, format_lsn(slot.confirmed_flush_lsn), plan.reason)
            self.status.baseline_complete, self.status.baseline_id = True, state.baseline_id if state else ""
            self.status.confirmed_lsn = slot.confirmed_flush_lsn
            return slot.confirmed_flush_lsn
        log.info("taking a baseline of %s: %s", ", ".join(map(str, o.tables)), plan.reason)
        if plan.drop_existing_slot:
            await db.drop_slot(o.slot_name)
        return await self._baseline(db, stream, identity, list(schemas.values()))

    async def _baseline(self, db: SourceDatabase, stream: ReplicationStream, identity: SystemIdentity,
                        schemas: list[TableSchema]) -> int:
        o, status = self._options, self.status
        status.phase, status.baseline_complete, status.baseline_rows = IngestPhase.BASELINE, False, 0
        state = IngestState(o.slot_name, identity.system_identifier, 0, False, IngestState.table_names(o.tables))
        await self._ports.state.put(o.source_id, state)  # before the slot exists: a crash from here re-baselines
        created = await stream.create_slot(o.slot_name, temporary=o.slot_mode is SlotMode.EPHEMERAL)
        baseline_id = make_baseline_id(created.consistent_lsn, int(time.time() * 1000))
        publisher = TrackedPublisher(self._ports.publisher, created.consistent_lsn, status)
        async with db.snapshot(created.snapshot_name) as reader:
            await publish_baseline(reader, publisher, self._ports.observer, status, source_id=o.source_id,
                                   subject_prefix=o.subject_prefix, baseline_id=baseline_id,
                                   snapshot_lsn=created.consistent_lsn, schemas=schemas,
                                   chunk_rows=o.baseline_chunk_rows, ack_timeout=o.baseline_ack_timeout)
        await self._ports.state.put(o.source_id, dataclasses.replace(
            state, baseline_lsn=created.consistent_lsn, baseline_complete=True, baseline_id=baseline_id))
        status.baseline_complete, status.baseline_id = True, baseline_id
        status.confirmed_lsn = created.consistent_lsn
        log.info("baseline %s complete: %d rows at %s", baseline_id, status.baseline_rows,
                 format_lsn(created.consistent_lsn))
        return created.consistent_lsn

    async def _stream(self, stream: ReplicationStream, schemas: Mapping[TableId, TableSchema], start_lsn: int,
                      stop: asyncio.Event) -> None:
        o = self._options
        await stream.start(o.slot_name, start_lsn, o.publication_name)
        self.status.phase = IngestPhase.STREAMING
        log.info("streaming slot %s from %s", o.slot_name, format_lsn(start_lsn))
        assembler = TransactionAssembler(o.source_id, o.subject_prefix, schemas, max_changes=o.max_batch_changes,
                                         max_bytes=o.max_batch_bytes)
        publisher = TrackedPublisher(self._ports.publisher, start_lsn, self.status)
        session = StreamingSession(stream, publisher, assembler, self._ports.observer, self.status,
                                   status_interval=o.status_interval, stop_timeout=o.stop_timeout)
        await session.run(stop)


async def _unless_stopped(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> T | None:
    """Run `work`, cancelling it if `stop` is set first (then return None)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, stopped, return_exceptions=True)
    return None if task.cancelled() else task.result()
