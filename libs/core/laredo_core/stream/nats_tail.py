"""The StreamTail port on JetStream: an ephemeral pull consumer on one table subject, from a stream sequence.

The connection is made at the first read and kept for later ones (`aclose()` ends it). Each read creates its
own consumer (no acks, removed when the read ends, and by the server after an hour of inactivity should the
process die first), so it never disturbs the service's live ordered consumers.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

from nats import errors as nats_errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from laredo_kernel.changes import TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.rebuild.pacing import MAX_GAP_SECONDS
from laredo_core.rebuild.tail import TailUnavailable, check_holds
from laredo_core.stream import naming
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.feed import FeedMessage
from laredo_core.stream.nats_connect import FAILURES, LazyNatsConnection

log = logging.getLogger(__name__)


class NatsStreamTail:
    """The StreamTail port (laredo_core.rebuild.tail) on JetStream; `json_values` as for NatsChangeFeed."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, json_values: bool = False,
                 client_name: str = "laredo-rebuild", batch: int = 512, fetch_timeout: float = 2.0) -> None:
        self._prefix = subject_prefix
        self._json_values = json_values
        self._batch = batch
        self._fetch_timeout = fetch_timeout
        self._nats = LazyNatsConnection(
            urls, lambda exc: TailUnavailable(f"cannot reach NATS at {', '.join(urls)} to read a stream tail "
                                              f"({exc!r})"),
            name=client_name, connect_timeout=2, max_reconnect_attempts=3, allow_reconnect=True)

    async def aclose(self) -> None:
        await self._nats.aclose()

    async def read(self, source_id: str, table: TableId, after: int, up_to: int) -> AsyncIterator[FeedMessage]:
        if up_to <= after:
            return
        js = (await self._nats.get()).jetstream()
        stream = naming.stream_name(self._prefix, source_id)
        subject = naming.table_subject(self._prefix, source_id, table)
        try:
            info = await js.stream_info(stream)
        except NotFoundError:
            raise TailUnavailable(f"stream {stream} does not exist, so the tail of {table} cannot be read") from None
        except FAILURES as exc:
            raise TailUnavailable(f"cannot read stream {stream} ({exc!r})") from exc
        check_holds(stream, table, info.state.first_seq, info.state.last_seq, after, up_to)
        # A paced replay may wait up to MAX_GAP_SECONDS between two fetches: the consumer must outlive that.
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1,
                                ack_policy=AckPolicy.NONE, inactive_threshold=MAX_GAP_SECONDS + 60.0)
        try:
            subscription = await js.pull_subscribe(subject, stream=stream, config=config)
        except FAILURES as exc:
            raise TailUnavailable(f"cannot read {subject} in {stream} ({exc!r})") from exc
        try:
            async for message in self._messages(subscription, stream, table, up_to):
                yield message
        finally:
            await _remove(js, subscription, stream)

    async def _messages(self, subscription: JetStreamContext.PullSubscription, stream: str, table: TableId,
                        up_to: int) -> AsyncIterator[FeedMessage]:
        while True:
            try:
                batch = await subscription.fetch(self._batch, timeout=self._fetch_timeout)
            except nats_errors.TimeoutError:
                log.warning("the tail of %s in %s ended before sequence %d", table, stream, up_to)
                return  # the caller sees the copy fall short of up_to
            except FAILURES as exc:
                raise TailUnavailable(f"reading the tail of {table} in {stream} failed ({exc!r})") from exc
            for msg in batch:
                sequence = msg.metadata.sequence.stream
                if sequence > up_to:
                    return
                try:
                    decoded = decode_batch(msg.data, json_values=self._json_values)
                except ProtocolError as exc:
                    log.error("skipping undecodable message at %s stream sequence %d (subject %s): %s", stream,
                              sequence, msg.subject, exc)
                else:
                    yield FeedMessage(table, decoded, sequence, msg.headers or {})
                if sequence >= up_to:
                    return


async def _remove(js: JetStreamContext, subscription: JetStreamContext.PullSubscription, stream: str) -> None:
    """Drop the consumer at once (the server would after its inactive threshold anyway)."""
    with contextlib.suppress(*FAILURES):
        info = await subscription.consumer_info()
        await js.delete_consumer(stream, info.name)
    with contextlib.suppress(*FAILURES):
        await subscription.unsubscribe()
