"""One replication session: frames in, batches published, only acknowledged positions confirmed.

Invariants:
- Standby status updates carry the tracker's confirmed LSN as write, flush and apply: the slot's start
  position until a transaction is fully acknowledged, never a position merely received.
- A failed publish ends the session with that error; the next session restarts from the slot and
  JetStream drops the re-sent duplicates by Nats-Msg-Id.
- Operator requests are carried out between two reads of frames, never in the middle of one: a pause
  stops reading (the walsender keeps the rest, the position is held, status updates keep the connection
  alive); an on-demand re-baseline holds reading while it runs (see rebaseline.py).
- Liveness: while waiting for frames, a probe (status update asking for a reply) goes out every
  status_interval; no frame at all for receive_timeout means the connection is dead.
- A clean stop waits (bounded) for outstanding acks, sends the final confirmation, then ends the COPY.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from laredo_core.runtime import cancel
from laredo_kernel.changes import TableId
from laredo_kernel.errors import LaredoError
from laredo_kernel.position import format_lsn

from laredo_ingest.application.control import ControlAction, IngestControl
from laredo_ingest.application.frame_handler import FrameHandler
from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.slot_monitor import SlotMonitor
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.baseline_reason import BaselineReason
from laredo_ingest.domain.errors import ReplicationInterrupted
from laredo_ingest.ports import ReplicationStream

log = logging.getLogger(__name__)

#: After a status update, wait this long before the next one so a burst of acks becomes one update.
FEEDBACK_COALESCE_SECONDS = 0.05
MAX_FRAMES_PER_READ = 1024

#: Re-baselines tables on demand (none = all), for a reason, and returns the snapshot LSN each was taken at.
Rebaseline = Callable[[frozenset[TableId], BaselineReason], Awaitable[dict[TableId, int]]]
#: Persists the paused flag so a restart stays paused.
RecordPause = Callable[[bool], Awaitable[None]]


class StreamingSession:
    def __init__(self, stream: ReplicationStream, publisher: TrackedPublisher, handler: FrameHandler,
                 status: IngestStatus, control: IngestControl, options: IngestOptions, *,
                 rebaseline: Rebaseline, record_pause: RecordPause, monitor: SlotMonitor | None,
                 skip_before: Callable[[TableId, int], None], paused: bool = False) -> None:
        self._stream = stream
        self._publisher = publisher
        self._handler = handler
        self._status = status
        self._control = control
        self._options = options  # status_interval, stop_timeout, receive_timeout
        self._rebaseline = rebaseline
        self._record_pause = record_pause
        self._monitor = monitor
        self._skip_before = skip_before
        self._paused = paused
        self._status_lock = asyncio.Lock()
        self._waiting_since: float | None = None  # set only while the reader waits in read_frames()
        self._reader_task: asyncio.Task[None] | None = None
        self._interrupting = False
        self.reset_request: object | None = None  # set when the session ended for a RESET

    async def run(self, stop: asyncio.Event) -> None:
        """Stream until `stop` is set or a reset is asked for (returns after a clean end), or something fails
        (raises)."""
        loops = [asyncio.create_task(self._feedback_loop(), name="ingest-feedback")]
        if self._monitor is not None:
            loops.append(asyncio.create_task(self._monitor.run(), name="ingest-slot-monitor"))
        try:
            await self._stream_until(stop, loops)
            await self._finish()
        finally:
            await cancel(loops)

    async def _stream_until(self, stop: asyncio.Event, loops: list[asyncio.Task[None]]) -> None:
        reader = asyncio.create_task(self._read_loop(), name="ingest-read")
        stopped = asyncio.create_task(stop.wait(), name="ingest-stop")
        failed = asyncio.create_task(self._publisher.failed.wait(), name="ingest-publish-failed")
        try:
            done, _ = await asyncio.wait({reader, stopped, failed, *loops}, return_when=asyncio.FIRST_COMPLETED)
            for task in (reader, *loops):  # a loop that ended has raised (or the reader asked to end)
                if task in done:
                    task.result()
            if self._publisher.failure is not None:
                raise self._publisher.failure
        finally:
            await cancel((reader, stopped, failed))

    async def _finish(self) -> None:
        with contextlib.suppress(Exception):
            await self._publisher.drain(self._options.stop_timeout)
        await self.send_status()
        await self._stream.stop()
        log.info("replication stopped cleanly; confirmed %s", format_lsn(self._publisher.confirmed_lsn))

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        control, handler, stream = self._control, self._handler, self._stream
        self._reader_task = asyncio.current_task()
        control.on_submit = self._interrupt_wait  # a request must not wait for the next frame
        self._set_phase()
        try:
            while True:
                if control.wakeup.is_set() or self._paused:
                    if await self._carry_out_requests():
                        return  # a reset: end the session
                    continue
                self._waiting_since = loop.time()
                try:
                    frames = await stream.read_frames(MAX_FRAMES_PER_READ)
                except asyncio.CancelledError:
                    # read_frames is cancellation-safe while it waits (no frame is lost): an interrupted
                    # wait just goes back to the top; any other cancellation ends the loop.
                    if not self._interrupting or self._reader_task.uncancel() > 0:  # type: ignore[union-attr]
                        raise
                    self._interrupting = False
                    continue
                finally:
                    self._waiting_since = None
                await handler.handle(frames)
        finally:
            control.on_submit = None

    def _interrupt_wait(self) -> None:
        """Called when a request arrives: cancel the reader's wait for frames (only while it waits there)."""
        if self._waiting_since is not None and not self._interrupting and self._reader_task is not None:
            self._interrupting = True
            self._reader_task.cancel()

    async def _carry_out_requests(self) -> bool:
        """Requests waiting now; while paused, wait for the next one. True: end the session (reset)."""
        if self._paused and not self._control.wakeup.is_set():
            await self._control.wakeup.wait()
        while (request := self._control.take()) is not None:
            if request.action is ControlAction.RESET:
                self.reset_request = request
                return True
            try:
                outcome = await self._carry_out(request.action, request.tables, request.reason)
            except LaredoError as exc:
                log.error("%s request failed: %s", request.action.value, exc)
                self._control.finish(request, exc)
                if self._publisher.failure is not None or exc.retryable:
                    raise  # the session cannot go on (e.g. a publish failed): the next one starts over
                continue
            except BaseException as exc:
                self._control.finish(request, exc)
                raise
            self._control.finish(request, outcome)
        self._set_phase()
        return False

    async def _carry_out(self, action: ControlAction, tables: frozenset[TableId], reason: BaselineReason) -> str:
        if action is ControlAction.PAUSE:
            await self._record_pause(True)
            self._paused = True
            log.info("paused: reading of the slot stops at %s", format_lsn(self._status.received_lsn))
            return "paused"
        if action is ControlAction.RESUME:
            await self._record_pause(False)
            self._paused = False
            log.info("resumed reading of the slot")
            return "resumed"
        self._status.phase = IngestPhase.REBASELINE
        self._status.changed()
        snapshots = await self._rebaseline(tables, reason)
        for table, lsn in snapshots.items():
            self._skip_before(table, lsn)
        return f"re-baselined {', '.join(sorted(map(str, snapshots)))}"

    def _set_phase(self) -> None:
        self._status.set_paused(self._paused)
        self._status.changed()

    async def _feedback_loop(self) -> None:
        advanced, interval = self._publisher.confirm_advanced, self._options.status_interval
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await advanced.wait()
            advanced.clear()
            waiting = loop.time() - self._waiting_since if self._waiting_since is not None else 0.0
            if waiting > self._options.receive_timeout:
                raise ReplicationInterrupted(
                    f"nothing received from the server for {waiting:.0f}s (receive_timeout "
                    f"{self._options.receive_timeout:g}s, liveness probes unanswered): the connection is "
                    "presumed dead; reconnecting")
            await self.send_status(reply_requested=waiting >= interval)
            await asyncio.sleep(FEEDBACK_COALESCE_SECONDS)

    async def send_status(self, *, reply_requested: bool = False) -> None:
        async with self._status_lock:
            lsn = self._publisher.confirmed_lsn
            await self._stream.send_status(lsn, lsn, lsn, reply_requested=reply_requested)
            self._status.confirmed_lsn = lsn
