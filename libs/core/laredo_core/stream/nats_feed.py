"""The ChangeFeed port on NATS JetStream: one ordered push consumer with a callback per table subject.

Ordered consumers with a callback are the fast path in nats-py (about 160-190k msgs/s here,
against 25k/s for fetch() or next_msg()): ephemeral, no acks, flow-controlled, and they
recreate themselves after a gap, so the callback sees every message in stream order.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats import errors as nats_errors
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError, ServiceUnavailableError

from laredo_kernel.changes import TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.runtime import cancel
from laredo_core.shutdown import close_quietly
from laredo_core.stream import naming
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.feed import (ChangeSink, FeedMessage, FeedSubscription, StreamMismatch, UndecodableMessage,
                                     hand_over_undecodable)
from laredo_core.stream.nats_connect import connect_nats
from laredo_core.stream.nats_servers import NatsServers

log = logging.getLogger(__name__)

#: Failures worth a retry while setting up: server away or slow, stream not created yet.
_TRANSIENT = (nats_errors.TimeoutError, nats_errors.NoRespondersError, nats_errors.NoServersError,
              nats_errors.ConnectionClosedError, ServiceUnavailableError, NotFoundError, OSError,
              asyncio.TimeoutError)
T = TypeVar("T")
_APPLY_SLICE = 0.005  # seconds of applying before the feed lets other tasks run


class NatsChangeFeed:
    """The ChangeFeed port (laredo_core.stream.feed) on JetStream; `json_values`: the sink gets JSON-compatible
    row values instead of typed ones; `client_name` names the connection on the NATS server."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, json_values: bool = False,
                 client_name: str = "laredo", initial_backoff: float = 0.25, max_backoff: float = 5.0,
                 pending_msgs_limit: int = 100_000, pending_bytes_limit: int = 256 * 1024 * 1024,
                 stall_after: float = 5.0) -> None:
        self._urls = NatsServers.of(urls)
        self._prefix = subject_prefix
        self._json_values = json_values
        self._client_name = client_name
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._pending_msgs_limit = pending_msgs_limit
        self._pending_bytes_limit = pending_bytes_limit
        self._stall_after = stall_after
        self._tables: dict[TableId, _TableConsumer] = {}
        self._wake: asyncio.Event | None = None  # the watcher's: a reconnect, or a table's consumer lost messages
        self._reconnected_since = False  # every table subscribes again

    def stalled(self) -> dict[TableId, str]:
        """The tables whose consumer made no progress for stall_after seconds while the stream held newer
        messages for them, each with what it waits for (empty: every table keeps up)."""
        return {table: consumer.stall for table, consumer in self._tables.items() if consumer.stall}

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None:
        self._wake = asyncio.Event()
        nc = await self._connect()
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        js = nc.jetstream()
        tasks = [asyncio.create_task(self._subscribe(js, s, sink, failed)) for s in subscriptions]
        tasks.append(asyncio.create_task(self._watch(js), name="feed-watch"))
        for task in tasks:
            task.add_done_callback(lambda t: _propagate_failure(t, failed))
        try:
            await failed  # only a failure ends a run; otherwise it lasts until cancelled
        finally:
            await cancel(tasks)
            await close_quietly("the change feed's NATS connection", nc.close)

    async def _connect(self) -> NatsClient:
        async def attempt() -> NatsClient:
            # With unlimited reconnects nats-py also keeps retrying the first connection; error_cb
            # turns each failed attempt into one log line instead of a traceback.
            return await connect_nats(self._urls, name=self._client_name, max_reconnect_attempts=-1,
                                      connect_timeout=2, allow_reconnect=True, error_cb=_log_nats_error,
                                      disconnected_cb=_log_disconnected, reconnected_cb=self._reconnected)

        return await self._with_backoff(attempt, lambda exc: f"cannot reach NATS at {', '.join(self._urls)} "
                                                             f"({exc!r})")

    async def _subscribe(self, js: JetStreamContext, subscription: FeedSubscription, sink: ChangeSink,
                         failed: asyncio.Future[None]) -> None:
        stream = naming.stream_name(self._prefix, subscription.source_id)
        subject = naming.table_subject(self._prefix, subscription.source_id, subscription.table)

        start_after = subscription.start_after_sequence

        async def last_sequence() -> int:
            """The subject's last stream sequence now (0 = no message); NotFoundError if no stream."""
            info = await js.stream_info(stream)
            if start_after and info.state.last_seq < start_after:
                raise StreamMismatch(stream, info.state.last_seq, start_after, subscription.table)
            if start_after and info.state.first_seq > start_after + 1:
                log.error("stream %s starts at sequence %d, after %d: messages of %s after the restored snapshot "
                          "were removed (stream limits); rows may miss changes until the next baseline",
                          stream, info.state.first_seq, start_after + 1, subscription.table)
            try:
                return (await js.get_last_msg(stream, subject)).seq or 0
            except NotFoundError:
                return 0

        caught_up_at = await self._with_backoff(
            last_sequence,
            lambda exc: (f"stream {stream} does not exist yet (ingest has not started source "
                         f"{subscription.source_id!r}?)" if isinstance(exc, NotFoundError)
                         else f"cannot read stream {stream} ({exc!r})"),
        )
        consumer = _TableConsumer(subscription, stream, subject, sink, caught_up_at, failed, self._json_values)
        consumer.on_lost = self._wake.set if self._wake is not None else consumer.on_lost
        if caught_up_at <= start_after:
            sink.on_caught_up(subscription.table)
        self._tables[subscription.table] = consumer
        await self._consume(js, consumer)
        log.info("consuming %s from stream %s after sequence %d (caught up at stream sequence %d)", subject, stream,
                 start_after, caught_up_at)

    async def _consume(self, js: JetStreamContext, consumer: _TableConsumer) -> None:
        """(Re)subscribe the table's ordered consumer right after the last message it took; messages still
        arriving on an earlier subscription are ignored (it takes each generation's alone)."""
        old, consumer.subscription = consumer.subscription, None
        if old is not None:
            with contextlib.suppress(Exception):  # the server may not answer, or have forgotten the consumer
                await old.unsubscribe()
        generation = consumer.new_generation()
        consumer.subscription = await self._with_backoff(
            lambda: js.subscribe(consumer.subject, stream=consumer.stream, ordered_consumer=True,
                                 cb=functools.partial(consumer.on_message, generation=generation),
                                 config=_start_after(consumer.last_sequence),
                                 pending_msgs_limit=self._pending_msgs_limit,
                                 pending_bytes_limit=self._pending_bytes_limit),
            lambda exc: f"cannot subscribe to {consumer.subject} in {consumer.stream} ({exc!r})",
        )

    async def _reconnected(self) -> None:
        log.info("reconnected to NATS; consumers resume after the last message each took")
        if self._wake is not None:
            self._reconnected_since = True
            self._wake.set()

    async def _watch(self, js: JetStreamContext) -> None:
        """Resubscribe every table at once after a reconnect (the server may have lost the ephemeral consumers
        and nats-py would notice only after missed heartbeats); report, and resubscribe, a table whose consumer
        stands still while the stream holds newer messages for it."""
        wake = self._wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        check = max(0.05, self._stall_after / 4)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(check):  # a timer for the stall check, not a hot path
                    await wake.wait()
            wake.clear()
            reconnected, self._reconnected_since = self._reconnected_since, False
            for consumer in list(self._tables.values()):
                if reconnected:
                    await self._consume(js, consumer)
                    consumer.progress(loop.time())
                elif consumer.lost:
                    log.warning("change feed of %s: %s; subscribing again after stream sequence %d", consumer.subject,
                                consumer.lost, consumer.last_sequence)
                    await self._consume(js, consumer)
                elif await self._stalled(js, consumer, loop.time()):
                    await self._consume(js, consumer)

    async def _stalled(self, js: JetStreamContext, consumer: _TableConsumer, now: float) -> bool:
        """Whether the consumer stood still for stall_after while the stream has newer messages for it."""
        if consumer.moved(now) or now - consumer.since < self._stall_after:
            return False
        try:
            newest = (await js.get_last_msg(consumer.stream, consumer.subject)).seq or 0
        except (NotFoundError, *_TRANSIENT):
            return False  # nothing to tell, or the server does not answer (then nats-py is reconnecting)
        taken = consumer.last_sequence
        if newest <= taken:
            consumer.progress(now)
            return False
        stall = (f"no message of {consumer.subject} taken for {now - consumer.since:.0f}s while stream "
                 f"{consumer.stream} holds up to sequence {newest} (last taken: {taken})")
        if consumer.stall != stall:
            log.warning("change feed stalled: %s; subscribing again", stall)
        consumer.stall = stall
        return True

    async def _with_backoff(self, attempt: Callable[[], Awaitable[T]], describe: Callable[[Exception], str]) -> T:
        delay = self._initial_backoff
        while True:
            try:
                return await attempt()
            except _TRANSIENT as exc:
                log.warning("%s; retrying in %.1fs", describe(exc), delay)
            await asyncio.sleep(delay)  # set-up retry, not a hot path
            delay = min(delay * 2, self._max_backoff)


def _start_after(sequence: int) -> ConsumerConfig | None:
    """A fresh config per attempt (subscribe() fills it in): deliver from sequence + 1, or from the start."""
    if not sequence:
        return None
    return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=sequence + 1)


async def _log_nats_error(error: Exception) -> None:
    log.warning("NATS: %s (%s); the client keeps retrying", error or type(error).__name__, type(error).__name__)


async def _log_disconnected() -> None:
    log.warning("disconnected from NATS; reconnecting")


def _propagate_failure(task: asyncio.Task[None], failed: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None and not failed.done():
        failed.set_exception(task.exception())  # type: ignore[arg-type]


class _TableConsumer:
    """One table's subscription: decodes and hands each message to the sink (a sink exception fails the feed's
    run()), and tracks its progress for the stall check.

    Messages come from one subscription generation at a time: after a resubscription, what an earlier
    subscription still delivers is ignored (the new one starts right after `last_sequence`).

    Each generation's consumer numbers what it delivers 1, 2, 3...; a number skipped is a message lost on the
    way: nats-py drops what overflows a subscription's pending limits (SlowConsumerError) and its ordered
    consumer carries on with the next one. Nothing after such a gap is taken: `lost` says why, and the feed
    subscribes again right after the last message taken (`on_lost` wakes it).
    """

    def __init__(self, subscription: FeedSubscription, stream: str, subject: str, sink: ChangeSink,
                 caught_up_at: int, failed: asyncio.Future[None], json_values: bool) -> None:
        self._json_values = json_values
        self._table = subscription.table
        self._source_id = subscription.source_id
        self.stream, self.subject = stream, subject
        self.subscription: JetStreamContext.PushSubscription | None = None
        self._sink = sink
        self._caught_up_at = caught_up_at
        self._caught_up = caught_up_at <= subscription.start_after_sequence
        self.yield_at = 0.0
        self._failed = failed
        self.last_sequence = subscription.start_after_sequence  # the stream sequence of the last message taken
        self._generation = 0
        self._delivered = 0  # the consumer sequence of the last message this generation delivered
        self.lost = ""  # why this generation's messages are no longer taken (a gap); empty while none
        self.on_lost: Callable[[], None] = lambda: None
        self.stall = ""  # why the table is stalled; empty while it keeps up
        self.since = 0.0  # when it last took a message (as far as the checks saw)
        self._seen = -1

    def moved(self, now: float) -> bool:
        """Whether it took messages since the last check (and if so, it is not stalled)."""
        if self.last_sequence == self._seen:
            return False
        self.progress(now)
        return True

    def progress(self, now: float) -> None:
        if self.stall:
            log.info("change feed of %s moves again (stream sequence %d)", self.subject, self.last_sequence)
        self._seen, self.since, self.stall = self.last_sequence, now, ""

    def new_generation(self) -> int:
        self._generation += 1
        self._delivered, self.lost = 0, ""
        return self._generation

    async def on_message(self, msg: Msg, generation: int = 0) -> None:  # nats-py wants a coroutine function
        if generation != self._generation or self.lost:
            return  # a subscription replaced since (or being replaced): the next one delivers it again, in order
        delivered = msg.metadata.sequence.consumer
        if delivered != self._delivered + 1:
            self.lost = (f"the consumer delivered message {delivered} after {self._delivered} (stream sequence "
                         f"{msg.metadata.sequence.stream}, last taken {self.last_sequence}): messages the NATS "
                         "client dropped (a slow consumer) or a consumer it replaced on its own")
            self.on_lost()
            return
        self._delivered = delivered
        self.handle(msg)
        # nats-py runs callbacks back to back while messages are pending: during a catch-up, give the
        # service's other tasks (gRPC, sessions) a turn every few milliseconds instead of only once it is over.
        loop = asyncio.get_running_loop()
        if loop.time() >= self.yield_at:
            await asyncio.sleep(0)
            self.yield_at = loop.time() + _APPLY_SLICE

    def handle(self, msg: Msg) -> None:
        try:
            sequence = msg.metadata.sequence.stream
            self.last_sequence = sequence
            self._deliver(msg, sequence)
            # At the start-up last sequence, or at the end of the stream if that message was removed.
            if not self._caught_up and (sequence >= self._caught_up_at or msg.metadata.num_pending == 0):
                self._caught_up = True
                self._sink.on_caught_up(self._table)
        except Exception as exc:  # noqa: BLE001 - handed to run(), which raises it
            if not self._failed.done():
                self._failed.set_exception(exc)

    def _deliver(self, msg: Msg, sequence: int) -> None:
        try:
            batch = decode_batch(msg.data, json_values=self._json_values)
        except ProtocolError as exc:
            hand_over_undecodable(self._sink, UndecodableMessage(
                self._source_id, self._table, sequence, msg.data,
                f"{exc} (stream {self.stream}, subject {msg.subject})"), log)
            return
        self._sink.on_batch(FeedMessage(self._table, batch, sequence, msg.headers or {}, msg.data))
