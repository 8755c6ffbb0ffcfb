"""The hot path of a replication session: CopyData frames in, batches published, confirmable positions marked.

Invariants:
- Frames are handled in server order; messages of a stream block go to their transaction's spool and
  reach the assembler only at its Stream Commit (an aborted streamed transaction never appears).
- A commit whose transaction published nothing marks its end LSN, so it becomes confirmable once every
  earlier message is acknowledged.
- A keepalive outside a transaction marks its wal_end: everything before it was received and handled.
- Messages published from one read of frames share one `ingest.publish` span (its traceparent travels in
  their headers): one span per transaction when transactions trickle in, fewer under a backlog.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack

from laredo_kernel.changes import BatchKind, TableId
from laredo_kernel.errors import ProtocolError
from laredo_kernel.position import format_lsn

from laredo_ingest.application.status import IngestStatus
from laredo_ingest.application.tracked_publisher import TrackedPublisher
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.pgoutput import (
    Commit,
    PgOutputMessage,
    Relation,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    decode_insert,
    decode_message,
    decode_row_change,
)
from laredo_ingest.domain.streamed import StreamedTransactions
from laredo_ingest.domain.transaction import TransactionAssembler
from laredo_ingest.domain.walproto import (
    PG_EPOCH_UNIX_US,
    PRIMARY_KEEPALIVE,
    XLOG_DATA,
    XLOG_DATA_HEADER_SIZE,
    parse_keepalive,
)
from laredo_ingest.ports import Observer

STREAM_STOP = 0x45  # 'E'
INSERT, UPDATE, DELETE, BEGIN, COMMIT = 0x49, 0x55, 0x44, 0x42, 0x43  # 'I', 'U', 'D', 'B', 'C'
RefreshCatalog = Callable[[Relation], Awaitable[None]]
SchemaChanged = Callable[[TableId], None]
ReplyNow = Callable[[], Awaitable[None]]


class FrameHandler:
    def __init__(self, assembler: TransactionAssembler, publisher: TrackedPublisher,
                 streamed: StreamedTransactions, observer: Observer, status: IngestStatus, *,
                 refresh_catalog: RefreshCatalog, reply_now: ReplyNow,
                 on_schema_change: SchemaChanged | None = None) -> None:
        self._assembler = assembler
        self._publisher = publisher
        self._streamed = streamed
        self._observer = observer
        self._status = status
        self._refresh_catalog = refresh_catalog
        self._reply_now = reply_now
        self._on_schema_change = on_schema_change

    async def handle(self, frames: Sequence[bytes | memoryview]) -> None:
        streamed, assembler = self._streamed, self._assembler
        with _PublishSpan(self._observer) as span:
            for frame in frames:
                kind = frame[0]
                if kind == XLOG_DATA:
                    # The hot path: row changes, Begin and Commit outside stream blocks skip the generic dispatch.
                    hot = not streamed.in_block and len(frame) > XLOG_DATA_HEADER_SIZE
                    message_kind = frame[XLOG_DATA_HEADER_SIZE] if hot else -1
                    if message_kind == INSERT:
                        batches = assembler.add_insert(*decode_insert(frame, XLOG_DATA_HEADER_SIZE))
                    elif message_kind == UPDATE or message_kind == DELETE:
                        batches = assembler.add_row_change(decode_row_change(frame, XLOG_DATA_HEADER_SIZE))
                    elif message_kind == BEGIN or message_kind == COMMIT:
                        await self._feed(decode_message(frame, XLOG_DATA_HEADER_SIZE), span)
                        continue
                    else:
                        await self._xlog_data(frame, span)
                        continue
                    if batches:
                        await self._publish(batches, span)
                elif kind == PRIMARY_KEEPALIVE:
                    await self._keepalive(frame)
                else:
                    raise ProtocolError(f"unknown replication frame type {kind:#04x} ({len(frame)} bytes)")

    async def _xlog_data(self, frame: bytes | memoryview, span: _PublishSpan) -> None:
        streamed = self._streamed
        stream_stop = len(frame) > XLOG_DATA_HEADER_SIZE and frame[XLOG_DATA_HEADER_SIZE] == STREAM_STOP
        if streamed.in_block and not stream_stop:
            streamed.add(frame, XLOG_DATA_HEADER_SIZE)
            return
        message = decode_message(frame, XLOG_DATA_HEADER_SIZE)
        message_type = type(message)
        if message_type is StreamStart:
            streamed.start(message)  # type: ignore[arg-type]
        elif message_type is StreamStop:
            streamed.stop()
            self._status.spooled_bytes = streamed.buffered_bytes
        elif message_type is StreamCommit:
            for replayed in streamed.commit(message):  # type: ignore[arg-type]
                await self._feed(replayed, span)
            self._status.spooled_bytes = streamed.buffered_bytes
            self._status.streamed_transactions += 1
        elif message_type is StreamAbort:
            streamed.abort(message)  # type: ignore[arg-type]
            self._status.spooled_bytes = streamed.buffered_bytes
            if message.xid == message.subxid:  # type: ignore[union-attr]
                self._status.aborted_streamed_transactions += 1
        else:
            await self._feed(message, span)

    async def _feed(self, message: PgOutputMessage, span: _PublishSpan) -> None:
        if type(message) is Relation and self._assembler.catalog_lacks(message):
            await self._refresh_catalog(message)  # type: ignore[arg-type]
        batches = self._assembler.feed(message)
        if batches:
            await self._publish(batches, span)
        if type(message) is Commit:
            self._committed(message, bool(batches))  # type: ignore[arg-type]

    async def _publish(self, batches: Sequence[OutboundBatch], span: _PublishSpan) -> None:
        headers = span.headers(batches[0])
        span.messages += len(batches)
        status, publisher = self._status, self._publisher
        for batch in batches:
            await publisher.publish(batch, headers)
            changes = len(batch.changes)
            if batch.kind is BatchKind.TRANSACTION:  # batch sizes: a sum and a max, cheap per message
                status.changes += changes
                status.batches += 1
                status.last_batch_changes = changes
                if changes > status.batch_changes_max:
                    status.batch_changes_max = changes
                if not batch.schema.has_usable_key:
                    status.deadlettered += changes
            elif batch.kind is BatchKind.SCHEMA_CHANGE and self._on_schema_change is not None:
                self._on_schema_change(batch.schema.table)

    def _committed(self, commit: Commit, published: bool) -> None:
        status = self._status
        status.transactions += 1
        if commit.end_lsn > status.received_lsn:
            status.received_lsn = commit.end_lsn
        status.lag_seconds = max(0.0, time.time() - (commit.commit_time_pg_us + PG_EPOCH_UNIX_US) / 1e6)
        if not published:  # nothing of ours in it: its end is confirmable once all before is
            self._publisher.mark(commit.end_lsn)

    async def _keepalive(self, frame: bytes | memoryview) -> None:
        keepalive = parse_keepalive(frame)
        status = self._status
        if keepalive.wal_end > status.received_lsn:
            status.received_lsn = keepalive.wal_end
        if not self._assembler.in_transaction and keepalive.wal_end:
            self._publisher.mark(keepalive.wal_end)
            if keepalive.wal_end >= status.server_lsn and not self._streamed.open_transactions:
                status.lag_seconds = 0.0  # caught up with the server
        if keepalive.reply_requested:
            await self._reply_now()


class _PublishSpan(ExitStack):
    """One `ingest.publish` span per read of frames, opened when that read publishes its first message."""

    def __init__(self, observer: Observer) -> None:
        super().__init__()
        self._observer = observer
        self._headers: dict[str, str] | None = None
        self.messages = 0

    def headers(self, first: OutboundBatch) -> dict[str, str]:
        if self._headers is None:
            span = self.enter_context(self._observer.span("ingest.publish", {
                "laredo.commit_lsn": format_lsn(first.commit_lsn), "laredo.xid": first.xid}))
            self.callback(lambda: span.set("laredo.messages", self.messages))  # last in, first out: before it ends
            self._headers = span.trace_headers()
        return self._headers
