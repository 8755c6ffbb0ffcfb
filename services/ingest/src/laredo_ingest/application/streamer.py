"""One replication session: frames in, batches published, only acknowledged positions confirmed.

Invariants:
- Standby status updates carry the tracker's confirmed LSN as write, flush and apply: the slot's start
  position until a transaction is fully acknowledged, never a position merely received.
- A keepalive between transactions, once every earlier message is acknowledged, confirms its wal_end:
  everything before it was received and published, and a quiet publication must not pin WAL forever.
- A failed publish ends the session with that error; the next session restarts from the slot and
  JetStream drops the re-sent duplicates by Nats-Msg-Id.
- Messages published from one read of frames share one `ingest.publish` span (its traceparent travels in
  their headers): one span per transaction when transactions trickle in, fewer under a backlog.
- A clean stop waits (bounded) for outstanding acks, sends the final confirmation, then ends the COPY.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager

from laredo_core.errors import ProtocolError
from laredo_core.position import format_lsn

from laredo_ingest.application.status import IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.pgoutput import Commit, decode_message
from laredo_ingest.domain.transaction import TransactionAssembler
from laredo_ingest.domain.walproto import (
    PRIMARY_KEEPALIVE,
    XLOG_DATA,
    XLOG_DATA_HEADER_SIZE,
    parse_keepalive,
)
from laredo_ingest.ports import Observer, ReplicationStream, Span

log = logging.getLogger(__name__)

#: After a status update, wait this long before the next one so a burst of acks becomes one update.
FEEDBACK_COALESCE_SECONDS = 0.05
MAX_FRAMES_PER_READ = 1024


class StreamingSession:
    def __init__(self, stream: ReplicationStream, publisher: TrackedPublisher, assembler: TransactionAssembler,
                 observer: Observer, status: IngestStatus, *, status_interval: float, stop_timeout: float) -> None:
        self._stream = stream
        self._publisher = publisher
        self._assembler = assembler
        self._observer = observer
        self._status = status
        self._status_interval = status_interval
        self._stop_timeout = stop_timeout
        self._status_lock = asyncio.Lock()

    async def run(self, stop: asyncio.Event) -> None:
        """Stream until `stop` is set (returns after a clean end) or something fails (raises)."""
        feedback = asyncio.create_task(self._feedback_loop(), name="ingest-feedback")
        try:
            await self._stream_until(stop, feedback)
            await self._finish()
        finally:
            feedback.cancel()
            await asyncio.gather(feedback, return_exceptions=True)

    async def _stream_until(self, stop: asyncio.Event, feedback: asyncio.Task[None]) -> None:
        reader = asyncio.create_task(self._read_loop(), name="ingest-read")
        stopped = asyncio.create_task(stop.wait(), name="ingest-stop")
        failed = asyncio.create_task(self._publisher.failed.wait(), name="ingest-publish-failed")
        try:
            done, _ = await asyncio.wait({reader, feedback, stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
            for task in (reader, feedback):  # a loop that ended has raised: that error comes first
                if task in done:
                    task.result()
            if self._publisher.failure is not None:
                raise self._publisher.failure
        finally:
            for task in (reader, stopped, failed):
                task.cancel()
            await asyncio.gather(reader, stopped, failed, return_exceptions=True)

    async def _finish(self) -> None:
        with contextlib.suppress(Exception):
            await self._publisher.drain(self._stop_timeout)
        await self._send_status()
        await self._stream.stop()
        log.info("replication stopped cleanly; confirmed %s", format_lsn(self._publisher.confirmed_lsn))

    async def _read_loop(self) -> None:
        while True:
            frames = await self._stream.read_frames(MAX_FRAMES_PER_READ)
            with _PublishSpan(self._observer) as span:
                await self._process(frames, span)

    async def _process(self, frames: Sequence[bytes | memoryview], span: _PublishSpan) -> None:
        assembler, publisher = self._assembler, self._publisher
        for frame in frames:
            kind = frame[0]
            if kind == XLOG_DATA:
                message = decode_message(frame, XLOG_DATA_HEADER_SIZE)
                batches = assembler.feed(message)
                if batches:
                    headers = span.headers(batches[0])
                    span.messages += len(batches)
                    for batch in batches:
                        await publisher.publish(batch, headers)
                if type(message) is Commit:
                    self._status.transactions += 1
                    if not batches:  # nothing of ours in it: its end is confirmable once all before is
                        publisher.mark(message.end_lsn)
            elif kind == PRIMARY_KEEPALIVE:
                await self._keepalive(frame)
            else:
                raise ProtocolError(f"unknown replication frame type {kind:#04x} ({len(frame)} bytes)")

    async def _keepalive(self, frame: bytes | memoryview) -> None:
        keepalive = parse_keepalive(frame)
        if not self._assembler.in_transaction and keepalive.wal_end:
            self._publisher.mark(keepalive.wal_end)
        if keepalive.reply_requested:
            await self._send_status()

    async def _feedback_loop(self) -> None:
        advanced = self._publisher.confirm_advanced
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._status_interval):
                    await advanced.wait()
            advanced.clear()
            await self._send_status()
            await asyncio.sleep(FEEDBACK_COALESCE_SECONDS)

    async def _send_status(self) -> None:
        async with self._status_lock:
            lsn = self._publisher.confirmed_lsn
            await self._stream.send_status(lsn, lsn, lsn)
            self._status.confirmed_lsn = lsn


class _PublishSpan:
    """One `ingest.publish` span per read of frames, opened when that read publishes its first message:
    a transaction arriving alone gets its own span, a backlog shares one span per read."""

    def __init__(self, observer: Observer) -> None:
        self._observer = observer
        self._context: AbstractContextManager[Span] | None = None
        self._span: Span | None = None
        self._headers: dict[str, str] = {}
        self.messages = 0

    def headers(self, first: OutboundBatch) -> dict[str, str]:
        if self._context is None:
            self._context = self._observer.span("ingest.publish", {
                "laredo.commit_lsn": format_lsn(first.commit_lsn), "laredo.xid": first.xid})
            self._span = self._context.__enter__()
            self._headers = self._span.trace_headers()
        return self._headers

    def __enter__(self) -> _PublishSpan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._context is not None and self._span is not None:
            self._span.set("laredo.messages", self.messages)
            self._context.__exit__(*exc_info)  # type: ignore[arg-type]
