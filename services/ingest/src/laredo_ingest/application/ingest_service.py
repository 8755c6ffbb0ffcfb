"""The ingest use case: start (resume or baseline), stream, and on a retryable failure start over from the slot.

Every attempt runs the whole start-up, so a lost connection, a failed publish or a crash all recover the
same way: the slot (stateful) or a new baseline (ephemeral, or an unfinished baseline) decides where the
stream continues, and JetStream drops whatever is published twice. When the slot of a completed baseline
is gone or invalidated, or the stream holds a change ahead of an earlier one that was lost (StreamTail.disorder),
downstream is told (RESYNC_REQUIRED) before the new baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from laredo_core.runtime import cancel
from laredo_kernel.errors import LaredoError
from laredo_kernel.position import format_lsn

from laredo_ingest.application.baseline import BaselineJob, publish_baseline
from laredo_ingest.application.control import IngestControl
from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.session_factory import SessionFactory
from laredo_ingest.application.startup import PreparedSource, check_slot_free, prepare_source
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.backoff import Backoff
from laredo_ingest.domain.baseline import make_baseline_id
from laredo_ingest.domain.baseline_reason import BaselineCause, BaselineReason
from laredo_ingest.domain.start_plan import (
    IngestState,
    SlotMode,
    StartKind,
    StreamTail,
    current_epoch,
    epoch_for_baseline,
    plan_start,
    wal_behind_stream,
)
from laredo_ingest.ports import IngestPorts, ReplicationStream, SourceDatabase, SystemIdentity

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class _Why:
    """Why a baseline is taken, and what downstream is told first ("" = nothing: no change can be missing)."""

    reason: BaselineReason
    resync: str

    @classmethod
    def continuity_lost(cls, cause: BaselineCause, detail: str) -> _Why:
        """Changes may be missing downstream: it is told so, with the detail, before the baseline."""
        return cls(BaselineReason(cause, detail), detail)

    def status_reason(self, resync: str) -> BaselineReason:
        """The reason with the detail downstream got (it may name a new epoch too)."""
        return dataclasses.replace(self.reason, detail=resync) if resync else self.reason


class IngestService:
    def __init__(self, options: IngestOptions, ports: IngestPorts, status: IngestStatus) -> None:
        self._options = options
        self._ports = ports
        self.status = status
        self.control = IngestControl()
        self._reset: object | None = None  # a RESET request, finished once its new baseline is complete

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
                    self.status.changed()
                    raise
                await self._wait_before_retry(stop, delay, backoff.failures, exc)
        self.status.phase = IngestPhase.STOPPED
        self.status.changed()

    async def _wait_before_retry(self, stop: asyncio.Event, delay: float, attempt: int, exc: LaredoError) -> None:
        self.status.phase, self.status.last_error = IngestPhase.RECONNECTING, str(exc)
        self.status.restarts += 1
        self.status.changed()
        log.warning("source %s: %s; restarting in %.1fs (failure %d in a row)", self._options.source_id, exc,
                    delay, attempt)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()

    async def _attempt(self, stop: asyncio.Event) -> None:
        o, ports = self._options, self._ports
        self.status.phase = IngestPhase.STARTING
        self.status.changed()
        db, stream = ports.database(), ports.replication()
        try:
            await db.open()
            if getattr(self._reset, "drop_publication", False):
                if o.publication_create:  # recreated by prepare_source just below
                    await db.drop_publication(o.publication_name)
                else:
                    log.warning("reset: publication %s is not managed by ingest (publication.create = false); "
                                "it is kept", o.publication_name)
            prepared = await prepare_source(db, o, ports.message_limit)
            self.status.keyless_tables = tuple(map(str, prepared.keyless))
            self.status.refused_tables = {str(t): reason for t, reason in prepared.refused.items()}
            identity = await stream.open()
            tail = await ports.publisher.ensure_stream(o.stream_spec())
            started = await _unless_stopped(self._resume_or_baseline(db, stream, identity, prepared, tail), stop)
            if started is None:
                return  # stopped during start-up or baseline: an unfinished baseline is redone next time
            start_lsn, state = started
            self._reset = await SessionFactory(o, ports, self.status, self.control, self._record_state).run(
                db, stream, prepared, start_lsn, state, stop)
        finally:
            await stream.close()
            await db.close()

    async def _resume_or_baseline(self, db: SourceDatabase, stream: ReplicationStream, identity: SystemIdentity,
                                  prepared: PreparedSource, tail: StreamTail | None) -> tuple[int, IngestState]:
        o = self._options
        slot = prepared.slot
        check_slot_free(slot)
        state = await self._ports.state.get(o.source_id)
        plan = plan_start(mode=o.slot_mode, slot_name=o.slot_name, database=identity.database, slot=slot,
                          state=state if o.slot_mode is SlotMode.STATEFUL else None,
                          system_identifier=identity.system_identifier, tables=prepared.fingerprints,
                          always_baseline=o.always_baseline)
        epoch, why = current_epoch(state, tail), _Why(plan.baseline_reason, plan.resync_reason)
        if self._reset is not None:
            why = _Why.continuity_lost(BaselineCause.OPERATOR_RESET, "the replication slot was reset by an operator")
        elif tail is not None and tail.disorder:
            why = _Why.continuity_lost(BaselineCause.STREAM_GAP, tail.disorder)
        elif plan.kind is StartKind.RESUME and slot is not None and state is not None:
            behind = wal_behind_stream(tail, epoch, await db.current_wal_lsn())
            if not behind:
                log.info("resuming slot %s at %s: %s", o.slot_name, format_lsn(slot.confirmed_flush_lsn),
                         plan.reason)
                self._resumed(slot.confirmed_flush_lsn, state)
                self._ports.publisher.use_epoch(epoch)
                return slot.confirmed_flush_lsn, state
            why = _Why.continuity_lost(BaselineCause.SOURCE_REWOUND, behind)
            log.warning("source %s: %s; the slot cannot continue the stream", o.source_id, behind)
        log.info("taking a baseline of %s: %s", ", ".join(map(str, prepared.tables)), why.reason)
        if slot is not None:
            await db.drop_slot(o.slot_name)
        paused = state.paused if state is not None else False
        return await self._baseline(db, stream, identity, prepared, why, paused, tail, epoch)

    def _resumed(self, lsn: int, state: IngestState) -> None:
        status = self.status
        status.baseline_complete, status.baseline_id = True, state.baseline_id
        status.baselines = {b.table: b for b in state.baselines}
        status.positioned_at(lsn)

    async def _baseline(self, db: SourceDatabase, stream: ReplicationStream, identity: SystemIdentity,
                        prepared: PreparedSource, why: _Why, paused: bool, tail: StreamTail | None,
                        epoch: int) -> tuple[int, IngestState]:
        o, status = self._options, self.status
        status.phase, status.baseline_complete, status.baseline_rows = IngestPhase.BASELINE, False, 0
        status.changed()
        state = IngestState(o.slot_name, identity.system_identifier, 0, False, prepared.fingerprints,
                            paused=paused, epoch=epoch)
        await self._ports.state.put(o.source_id, state)  # before the slot exists: a crash from here re-baselines
        created = await stream.create_slot(o.slot_name, temporary=o.slot_mode is SlotMode.EPHEMERAL)
        resync_reason, state = self._enter_epoch(tail, state, created.consistent_lsn, why.resync)
        baseline_id = make_baseline_id(created.consistent_lsn, int(time.time() * 1000))
        status.baselines.clear()  # every configured table is in this baseline: tables no longer configured go
        status.record_baseline(map(str, prepared.tables), why.status_reason(resync_reason), baseline_id)
        publisher = TrackedPublisher(self._ports.publisher, created.consistent_lsn, status)
        job = BaselineJob(o, baseline_id, created.consistent_lsn, [prepared.schemas[t] for t in prepared.tables],
                          prepared.row_filters, prepared.limits, resync_reason)
        expected = sum((await db.row_estimates(prepared.tables)).values())
        async with db.snapshot(created.snapshot_name) as reader:
            await publish_baseline(reader, publisher, self._ports.observer, status, job, expected_rows=expected)
        state = dataclasses.replace(state, baseline_lsn=created.consistent_lsn, baseline_complete=True,
                                    baseline_id=baseline_id, baselines=tuple(status.baselines.values()))
        await self._ports.state.put(o.source_id, state)
        status.baseline_complete, status.baseline_id = True, baseline_id
        status.positioned_at(created.consistent_lsn)
        status.changed()
        log.info("baseline %s complete: %d rows at %s", baseline_id, status.baseline_rows,
                 format_lsn(created.consistent_lsn))
        if self._reset is not None:
            request, self._reset = self._reset, None
            self.control.finish(request, f"slot reset; new baseline {baseline_id}")  # type: ignore[arg-type]
        return created.consistent_lsn, state

    def _enter_epoch(self, tail: StreamTail | None, state: IngestState, snapshot_lsn: int,
                     resync_reason: str) -> tuple[str, IngestState]:
        """Publish the baseline in the next epoch when the stream already holds positions at or after its
        snapshot: consumers then apply it instead of skipping it as a replay (and say why: RESYNC_REQUIRED)."""
        epoch = epoch_for_baseline(state.epoch, tail, snapshot_lsn)
        self._ports.publisher.use_epoch(epoch)
        if epoch == state.epoch:
            return resync_reason, state
        why = wal_behind_stream(tail, state.epoch, snapshot_lsn)
        log.warning("source %s: %s; the baseline at %s starts epoch %d, which every consumer applies whatever "
                    "positions it holds", self._options.source_id, why, format_lsn(snapshot_lsn), epoch)
        reason = f"{why}; new epoch {epoch}"
        if resync_reason and why not in resync_reason:
            reason = f"{resync_reason}; {reason}"
        return reason, dataclasses.replace(state, epoch=epoch)

    async def _record_state(self, **changes: Any) -> None:
        """Update fields of the stored state (pending re-baselines, paused)."""
        o = self._options
        state = await self._ports.state.get(o.source_id)
        if state is not None:
            await self._ports.state.put(o.source_id, dataclasses.replace(state, **changes))


async def _unless_stopped(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> T | None:
    """Run `work`, cancelling it if `stop` is set first (then return None)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel((task, stopped))  # a finished task is left as it is
    return None if task.cancelled() else task.result()

