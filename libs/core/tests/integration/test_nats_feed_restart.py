"""The JetStream change feed after its NATS server restarts while changes flow: it consumes again promptly (it does
not wait for the ordered consumer's missed heartbeats), in order, with nothing lost or repeated; and a consumer
that stands still while the stream holds newer messages is reported as stalled."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from laredo_testing.eventually import eventually
from laredo_testing.servers import NatsServer
from laredo_testing.stream import Batches

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.stream import naming
from laredo_core.stream.feed import FeedMessage, FeedSubscription
from laredo_core.stream.nats_feed import NatsChangeFeed
from laredo_core.runtime import cancel

pytestmark = pytest.mark.integration

TABLE = TableId("public", "items")
COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),)
PREFIX, SOURCE = "restart", "pg"
#: Well under the 10-20s the ordered consumer's own recovery takes (two missed 5s heartbeats).
PROMPTLY = 6.0


class Recorder:
    def __init__(self) -> None:
        self.sequences: list[int] = []

    def on_batch(self, message: FeedMessage) -> None:
        self.sequences.append(message.stream_sequence)

    def on_caught_up(self, table: TableId) -> None:
        pass


@pytest.fixture
async def own_nats(tmp_path: Path) -> AsyncIterator[NatsServer]:
    (tmp_path / "nats").mkdir()
    server = NatsServer(tmp_path / "nats").start()
    nc = await nats.connect(server.url)
    await nc.jetstream().add_stream(name=naming.stream_name(PREFIX, SOURCE),
                                    subjects=[naming.source_subject_filter(PREFIX, SOURCE)])
    await nc.close()
    try:
        yield server
    finally:
        server.close()


async def publish_forever(url: str, published: list[int]) -> None:
    """One change at a time, each retried until JetStream stores it (also while the server is away)."""
    batches = Batches(table=TABLE, columns=COLUMNS)
    subject = naming.table_subject(PREFIX, SOURCE, TABLE)
    nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    js = nc.jetstream(timeout=1)
    try:
        for i in range(1, 1_000_000):
            data = batches.transaction(batches.insert({"id": i}))
            while True:
                try:
                    published.append((await js.publish(subject, data, headers={"Nats-Msg-Id": str(i)})).seq)
                    break
                except Exception:  # noqa: BLE001 - the server is away: try again
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.01)  # a steady source
    finally:
        await nc.close()


async def test_the_feed_consumes_again_promptly_after_nats_restarts(own_nats: NatsServer) -> None:
    feed = NatsChangeFeed([own_nats.url], PREFIX, initial_backoff=0.1, max_backoff=1.0, stall_after=2.0)
    sink, published = Recorder(), []
    consuming = asyncio.create_task(feed.run([FeedSubscription(SOURCE, TABLE)], sink))
    publishing = asyncio.create_task(publish_forever(own_nats.url, published))
    try:
        await eventually(lambda: len(sink.sequences) >= 50, what="the feed consuming")
        own_nats.stop()
        own_nats.start()  # same port, same store: the stream survives, the feed's ephemeral consumer does not
        mark = len(published)
        await eventually(lambda: len(published) >= mark + 50, what="publishing again after the restart")
        target = published[mark + 49]
        await eventually(lambda: sink.sequences and sink.sequences[-1] >= target, timeout=PROMPTLY,
                         what="the feed to consume changes published after the restart")
        assert sink.sequences == list(range(1, len(sink.sequences) + 1))  # in order, nothing lost or repeated
        assert not feed.stalled()
    finally:
        await cancel((publishing, consuming))


async def test_a_consumer_that_stands_still_is_reported_stalled(own_nats: NatsServer) -> None:
    """The sink blocks the event loop's callback chain for this table only: its consumer cannot take messages."""
    feed = NatsChangeFeed([own_nats.url], PREFIX, stall_after=0.5)
    sink, published = Recorder(), []
    consuming = asyncio.create_task(feed.run([FeedSubscription(SOURCE, TABLE)], sink))
    publishing = asyncio.create_task(publish_forever(own_nats.url, published))
    try:
        await eventually(lambda: len(sink.sequences) >= 10, what="the feed consuming")
        consumer = feed._tables[TABLE]  # noqa: SLF001 - the fault: its subscription stops delivering
        assert consumer.subscription is not None
        consumer.new_generation()  # what the current subscription delivers is now ignored
        await eventually(lambda: TABLE in feed.stalled(), what="the table reported stalled")
        assert "while stream RESTART_PG holds up to sequence" in feed.stalled()[TABLE]
        mark = len(sink.sequences)
        await eventually(lambda: len(sink.sequences) > mark + 10 and not feed.stalled(),
                         what="the feed to subscribe again and move on")
        assert sink.sequences == list(range(1, len(sink.sequences) + 1))
    finally:
        await cancel((publishing, consuming))


class SlowRecorder(Recorder):
    """A sink slower than NATS delivers: the client's queue of pending messages overflows."""

    def on_batch(self, message: FeedMessage) -> None:
        time.sleep(0.002)  # applying a large message
        super().on_batch(message)


async def test_messages_the_client_drops_as_a_slow_consumer_are_consumed_again_not_lost(
        own_nats: NatsServer, caplog: pytest.LogCaptureFixture) -> None:
    """nats-py drops what overflows a subscription's pending limits (SlowConsumerError) and its ordered consumer
    goes on with the next message: the feed notices the gap in the consumer's sequence and subscribes again after
    the last message it took, so the sink still gets every message, in order."""
    batches = Batches(table=TABLE, columns=COLUMNS)
    nc = await nats.connect(own_nats.url)
    js = nc.jetstream()
    subject = naming.table_subject(PREFIX, SOURCE, TABLE)
    published = 400
    for i in range(1, published + 1):
        await js.publish(subject, batches.transaction(*(batches.insert({"id": i * 100 + j}) for j in range(100))))
    await nc.close()
    feed = NatsChangeFeed([own_nats.url], PREFIX, pending_msgs_limit=64, pending_bytes_limit=1024 * 1024)
    sink = SlowRecorder()
    consuming = asyncio.create_task(feed.run([FeedSubscription(SOURCE, TABLE)], sink))
    try:
        await eventually(lambda: len(sink.sequences) >= published, timeout=60,
                         what="every message despite the dropped ones")
        assert sink.sequences == list(range(1, published + 1)), "in order, nothing lost or repeated"
        assert "messages the NATS client dropped" in caplog.text, "the loss and the recovery are said"
    finally:
        consuming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consuming
