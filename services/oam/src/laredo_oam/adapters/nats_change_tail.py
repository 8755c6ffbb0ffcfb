"""The ChangeTail port on NATS JetStream: one ordered ephemeral consumer per followed topic, from "now".

A table topic consumes `<prefix>.<source>.table.<schema>.<table>`, a source topic `<prefix>.<source>.table.>`
(never dead letters). A consumer delivers the messages stored from the moment its topic was first followed
(JetStream's by-start-time policy, compared with the server's clock: a clock of OAM's host ahead of the NATS
server's loses that much at the start), also when the stream is created only later or the connection takes a
while; a stream that does not exist yet is waited for. Messages are parsed only as far as WatchStatus needs
(kind, table, actions, ordinals, LSN, xid): row values are never decoded. Nothing is acknowledged or stored on
the server. Messages the NATS client drops as a slow consumer are followed again (see _consume).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from google.protobuf.message import DecodeError
from nats import errors as nats_errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError, ServiceUnavailableError

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import Action, TableId
from laredo_kernel.position import Position
from laredo_core.stream import naming
from laredo_core.stream.nats_connect import connect_nats
from laredo_core.stream.nats_servers import NatsServers
from laredo_core.runtime import cancel

from laredo_oam.domain.watch import ObservedChange
from laredo_oam.ports import ChangeSink, TailTopic

log = logging.getLogger(__name__)

_TRANSIENT = (nats_errors.TimeoutError, nats_errors.NoRespondersError, nats_errors.NoServersError,
              nats_errors.ConnectionClosedError, ServiceUnavailableError, NotFoundError, OSError,
              asyncio.TimeoutError)
_ACTIONS = {pb.ACTION_INSERT: Action.INSERT, pb.ACTION_UPDATE: Action.UPDATE, pb.ACTION_DELETE: Action.DELETE,
            pb.ACTION_TRUNCATE: Action.TRUNCATE}
_TRANSACTION = "TRANSACTION"  # the Laredo-Kind header of transaction messages
REMEMBERED_MESSAGES = 4096  # (stream, sequence) pairs kept to deliver overlapping topics' messages once
T = TypeVar("T")


def observed_changes(source_id: str, data: bytes) -> list[ObservedChange]:
    """The row changes of one transaction message ([] for any other kind); raises DecodeError if corrupt."""
    batch = pb.ChangeBatch.FromString(data)
    if batch.kind != pb.BATCH_KIND_TRANSACTION:
        return []
    table = TableId(batch.table.schema, batch.table.name)
    return [ObservedChange(source_id, table, _ACTIONS[c.action], Position(batch.commit_lsn, c.ordinal, batch.epoch),
                           batch.xid) for c in batch.changes if c.action in _ACTIONS]


class NatsChangeTail:
    """ChangeTail (laredo_oam.ports) on JetStream; see the module docstring. One connection per run()."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, client_name: str = "laredo-oam",
                 initial_backoff: float = 0.25, max_backoff: float = 2.0, pending_msgs_limit: int = 100_000,
                 pending_bytes_limit: int = 64 * 1024 * 1024, stall_after: float = 5.0) -> None:
        self._urls = NatsServers.of(urls)
        self._stall_after = stall_after
        self._pending = {"pending_msgs_limit": pending_msgs_limit, "pending_bytes_limit": pending_bytes_limit}
        self._prefix = subject_prefix
        self._client_name = client_name
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._wanted: frozenset[TailTopic] = frozenset()
        self._since: dict[TailTopic, float] = {}  # when each followed topic was first followed (Unix seconds)
        self._changed = asyncio.Event()
        self._seen: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._nats_down = False

    def follow(self, topics: frozenset[TailTopic]) -> None:
        now = time.time()
        self._since = {topic: self._since.get(topic, now) for topic in topics}
        self._wanted = topics
        self._changed.set()

    async def run(self, sink: ChangeSink) -> None:
        consumers: dict[TailTopic, asyncio.Task[None]] = {}
        nc = await self._connect()
        try:
            js = nc.jetstream()
            while True:
                self._changed.clear()
                wanted = self._wanted
                for topic in [t for t in consumers if t not in wanted]:
                    consumers.pop(topic).cancel()
                for topic in wanted - consumers.keys():
                    consumers[topic] = asyncio.create_task(self._consume(js, topic, sink),
                                                           name=f"oam-tail:{topic.source_id}:{topic.table or '*'}")
                await self._changed.wait()
        finally:
            await cancel(consumers.values())
            await nc.close()

    async def _connect(self) -> NatsClient:
        # With unlimited reconnects nats-py keeps retrying the first connection too; the callbacks log an
        # outage once when it starts and once when it ends.
        return await connect_nats(self._urls, name=self._client_name, max_reconnect_attempts=-1,
                                  connect_timeout=2, allow_reconnect=True, error_cb=self._on_error,
                                  disconnected_cb=self._on_disconnected, reconnected_cb=self._on_reconnected)

    async def _consume(self, js: JetStreamContext, topic: TailTopic, sink: ChangeSink) -> None:
        stream = naming.stream_name(self._prefix, topic.source_id)
        subject = (naming.table_subject(self._prefix, topic.source_id, topic.table) if topic.table is not None
                   else f"{self._prefix}.{naming.escape_token(topic.source_id)}.table.>")
        since = datetime.datetime.fromtimestamp(self._since.get(topic, time.time()), datetime.UTC)
        # Each subscription numbers what it delivers 1, 2, 3...: a number skipped is messages nats-py dropped as a
        # slow consumer (its ordered consumer goes on after them); a consumer that stops delivering while the stream
        # holds newer messages lost its flow control that way. Either way the tail subscribes again after the last
        # message it took, so watchers miss nothing.
        last_taken, delivered, generation, lost = 0, 0, 0, asyncio.Event()

        async def on_message(msg: Msg, of: int) -> None:
            nonlocal last_taken, delivered
            if of != generation or lost.is_set():
                return  # an earlier subscription's, or after a gap: the next subscription delivers it again
            sequence = msg.metadata.sequence
            if sequence.consumer != delivered + 1:
                log.warning("WatchStatus: %s of stream %s delivered message %d after %d: messages dropped by the "
                            "NATS client (a slow consumer); following again after stream sequence %d", subject,
                            stream, sequence.consumer, delivered, last_taken)
                lost.set()
                return
            delivered, last_taken = sequence.consumer, sequence.stream
            self._deliver(stream, topic.source_id, msg, sink)

        def config() -> ConsumerConfig:  # a fresh one per attempt: subscribe() fills it in
            if last_taken:
                return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=last_taken + 1)
            return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since)

        while True:
            generation += 1
            callback = functools.partial(on_message, of=generation)
            subscription = await self._with_backoff(
                lambda: js.subscribe(subject, stream=stream, ordered_consumer=True, cb=callback, config=config(),
                                     **self._pending),
                lambda exc: (f"WatchStatus row changes: stream {stream} does not exist yet (has ingest started "
                             f"source {topic.source_id!r}?)" if isinstance(exc, NotFoundError) else
                             f"WatchStatus row changes: cannot subscribe to {subject} in {stream} ({exc!r})"))
            log.info("WatchStatus: following %s of stream %s from %s", subject, stream,
                     f"stream sequence {last_taken + 1}" if last_taken else since.isoformat())
            try:
                await self._until_lost(js, stream, subject, lost, lambda: last_taken)
            finally:
                with contextlib.suppress(Exception):
                    await subscription.unsubscribe()
            delivered = 0
            lost.clear()

    async def _until_lost(self, js: JetStreamContext, stream: str, subject: str, lost: asyncio.Event,
                          taken: Callable[[], int]) -> None:
        """Until the callback saw a gap, or the consumer stood still for stall_after while the stream holds a
        newer message for it (the callback does the work meanwhile)."""
        seen = taken()
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._stall_after):  # a timer for the stall check, not a hot path
                    await lost.wait()
            if lost.is_set() or taken() != seen:
                seen = taken()
                continue
            try:
                newest = ((await js.get_last_msg(stream, subject)).seq if "*" not in subject and ">" not in subject
                          else (await js.stream_info(stream)).state.last_seq)
            except _TRANSIENT:
                continue  # nothing to tell, or the server does not answer (then nats-py is reconnecting)
            if newest > seen:
                log.warning("WatchStatus: %s of stream %s took nothing for %.0fs while the stream holds up to "
                            "sequence %d (last taken: %d); following again", subject, stream, self._stall_after,
                            newest, seen)
                lost.set()

    def _deliver(self, stream: str, source_id: str, msg: Msg, sink: ChangeSink) -> None:
        kind = (msg.headers or {}).get(naming.HEADER_KIND)
        if kind is not None and kind != _TRANSACTION:
            return  # baseline, control: no row change for watchers
        sequence = msg.metadata.sequence.stream
        if not self._first_delivery(stream, sequence):
            return
        try:
            changes = observed_changes(source_id, msg.data)
        except DecodeError as exc:
            log.error("WatchStatus: skipping undecodable message %d of %s: %s", sequence, stream, exc)
            return
        if changes:
            try:
                sink(changes)
            except Exception:  # noqa: BLE001 - a watcher's bug must not stop the consumer
                log.exception("WatchStatus: delivering the changes of message %d of %s failed", sequence, stream)

    def _first_delivery(self, stream: str, sequence: int) -> bool:
        key = (stream, sequence)
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > REMEMBERED_MESSAGES:
            self._seen.popitem(last=False)
        return True

    async def _with_backoff(self, attempt: Callable[[], Awaitable[T]], describe: Callable[[Exception], str]) -> T:
        delay, logged = self._initial_backoff, False
        while True:
            try:
                return await attempt()
            except _TRANSIENT as exc:
                # Once at warning level, then quietly: a watcher may wait long for a source to start.
                log.log(logging.DEBUG if logged else logging.WARNING, "%s; retrying every %.1fs at most", describe(exc),
                        self._max_backoff)
                logged = True
            await asyncio.sleep(delay)  # set-up retry, not a hot path
            delay = min(delay * 2, self._max_backoff)

    async def _on_error(self, error: Exception) -> None:
        self._down("NATS at %s is unreachable (%s); state changes go on, row changes resume when it is back",
                   ", ".join(self._urls), error or type(error).__name__)

    async def _on_disconnected(self) -> None:
        self._down("disconnected from NATS; reconnecting")

    def _down(self, message: str, *args: object) -> None:
        """Logged once per outage."""
        if not self._nats_down:
            log.warning("WatchStatus row changes: " + message, *args)
        self._nats_down = True

    async def _on_reconnected(self) -> None:
        log.info("WatchStatus row changes: reconnected to NATS; consumers resume where they were")
        self._nats_down = False
