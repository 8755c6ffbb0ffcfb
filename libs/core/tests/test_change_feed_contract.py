"""The ChangeFeed contract (laredo_core.stream.feed), run against the in-memory fake and the real JetStream adapter."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import nats
import pytest
from laredo_testing import stream
from laredo_testing.eventually import eventually

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.stream import naming
from laredo_core.stream.feed import ChangeFeed, FeedMessage, FeedSubscription, StreamMismatch, UndecodableMessage
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_core.stream.nats_feed import NatsChangeFeed

SOURCE = "pg"
TABLE = TableId("public", "items")
OTHER = TableId("public", "other")
COLUMNS = (
    ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text"),
    ColumnInfo("price", 1700, "numeric"),
)


@dataclass
class Batches(stream.Batches):
    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS


def insert(values: Mapping[str, Any]) -> Any:
    return Batches().insert(values)


def row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "price": Decimal(f"{i}.50")}


class Backend(Protocol):
    feed: ChangeFeed

    async def create_stream(self) -> None: ...

    async def publish(self, table: TableId, data: bytes, headers: Mapping[str, str] | None = None) -> None: ...


@dataclass
class MemoryBackend:
    json_values: bool = False
    feed: MemoryChangeFeed = field(init=False)

    def __post_init__(self) -> None:
        self.feed = MemoryChangeFeed(json_values=self.json_values, stream_exists=False)

    async def create_stream(self) -> None:
        self.feed.create_stream()

    async def publish(self, table: TableId, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.feed.publish(table, data, headers)


@dataclass
class NatsBackend:
    feed: NatsChangeFeed
    nc: Any
    prefix: str

    async def create_stream(self) -> None:
        await self.nc.jetstream().add_stream(name=naming.stream_name(self.prefix, SOURCE),
                                             subjects=[naming.source_subject_filter(self.prefix, SOURCE)])

    async def publish(self, table: TableId, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        await self.nc.jetstream().publish(naming.table_subject(self.prefix, SOURCE, table), data,
                                          headers=dict(headers) if headers else None)


@dataclass
class RecordingSink:
    events: list[tuple[str, TableId, int]] = field(default_factory=list)
    messages: list[FeedMessage] = field(default_factory=list)
    fail_on: int = 0  # raise on the n-th batch (1-based); 0 = never

    def on_batch(self, message: FeedMessage) -> None:
        self.messages.append(message)
        self.events.append(("batch", message.table, message.stream_sequence))
        if len(self.messages) == self.fail_on:
            raise RuntimeError("sink failure")

    def on_caught_up(self, table: TableId) -> None:
        self.events.append(("caught_up", table, 0))

    def batches(self, table: TableId) -> list[FeedMessage]:
        return [m for m in self.messages if m.table == table]


@pytest.fixture(params=[False, True], ids=["typed", "json"])
def json_values(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.integration)])
async def backend(request: pytest.FixtureRequest, unique_name: str, json_values: bool) -> AsyncIterator[Backend]:
    if request.param == "memory":
        yield MemoryBackend(json_values)
        return
    nats_url = request.getfixturevalue("nats_url")
    nc = await nats.connect(nats_url)
    try:
        yield NatsBackend(NatsChangeFeed([nats_url], unique_name, json_values=json_values, client_name="test",
                                         initial_backoff=0.05, max_backoff=0.2), nc, unique_name)
    finally:
        try:
            await nc.jetstream().delete_stream(naming.stream_name(unique_name, SOURCE))
        except nats.js.errors.NotFoundError:
            pass
        await nc.close()


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def start(backend: Backend, sink: RecordingSink, running: list[asyncio.Task[None]],
          tables: tuple[TableId, ...] = (TABLE,)) -> asyncio.Task[None]:
    task = asyncio.create_task(backend.feed.run([FeedSubscription(SOURCE, t) for t in tables], sink))
    running.append(task)
    return task


async def test_delivers_from_the_start_in_order_then_reports_caught_up_then_follows(
        backend: Backend, running: list[asyncio.Task[None]], json_values: bool) -> None:
    await backend.create_stream()
    batches = Batches()
    existing = batches.baseline([row(i) for i in range(1, 6)], chunk_rows=2)  # 5 messages
    for data in existing:
        await backend.publish(TABLE, data, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    sink = RecordingSink()
    start(backend, sink, running)
    await eventually(lambda: ("caught_up", TABLE, 0) in sink.events, what="caught up")
    assert [e[0] for e in sink.events] == ["batch"] * 5 + ["caught_up"]
    sequences = [m.stream_sequence for m in sink.messages]
    assert sequences == sorted(sequences) and len(set(sequences)) == 5
    assert sink.messages[0].headers.get("traceparent", "").startswith("00-0af7651916cd43dd")
    assert [m.batch.kind.value for m in sink.messages][::4] == ["BASELINE_BEGIN", "BASELINE_END"]

    await backend.publish(TABLE, batches.transaction(insert(row(6))))
    await eventually(lambda: len(sink.messages) == 6, what="the new message")
    expected = {"id": 6, "name": "n6", "price": "6.50" if json_values else Decimal("6.50")}
    assert sink.messages[-1].batch.changes[0].new == expected
    assert type(sink.messages[-1].batch.changes[0].new["price"]) is type(expected["price"])  # type: ignore[index]
    assert sink.events.count(("caught_up", TABLE, 0)) == 1


async def test_undecodable_message_is_skipped_and_delivery_continues(
        backend: Backend, running: list[asyncio.Task[None]]) -> None:
    await backend.create_stream()
    batches = Batches()
    await backend.publish(TABLE, batches.transaction(insert(row(1))))
    await backend.publish(TABLE, b"\xff\x00 definitely not a ChangeBatch")
    await backend.publish(TABLE, batches.transaction(insert(row(2))))
    sink = RecordingSink()
    task = start(backend, sink, running)
    await eventually(lambda: ("caught_up", TABLE, 0) in sink.events, what="caught up past the corrupt message")
    assert [m.batch.changes[0].new["id"] for m in sink.messages] == [1, 2]  # type: ignore[index]
    await backend.publish(TABLE, batches.transaction(insert(row(3))))
    await eventually(lambda: len(sink.messages) == 3, what="delivery after the corrupt message")
    assert not task.done()


@dataclass
class KeepingSink(RecordingSink):
    undecodable: list[UndecodableMessage] = field(default_factory=list)

    def on_undecodable(self, message: UndecodableMessage) -> None:
        self.undecodable.append(message)


async def test_undecodable_message_goes_to_a_sink_that_keeps_them_with_its_bytes(
        backend: Backend, running: list[asyncio.Task[None]]) -> None:
    await backend.create_stream()
    good = Batches().transaction(insert(row(1)))
    await backend.publish(TABLE, b"\xff\x00 corrupt")
    await backend.publish(TABLE, good)
    sink = KeepingSink()
    start(backend, sink, running)
    await eventually(lambda: len(sink.messages) == 1 and sink.undecodable, what="both messages handed over")
    (bad,) = sink.undecodable
    assert (bad.source_id, bad.table, bad.data) == (SOURCE, TABLE, b"\xff\x00 corrupt")
    assert "corrupt change batch" in bad.error and bad.stream_sequence < sink.messages[0].stream_sequence
    assert sink.messages[0].data == good, "each message carries its bytes as stored"


async def test_waits_for_a_stream_that_does_not_exist_yet(
        backend: Backend, running: list[asyncio.Task[None]]) -> None:
    sink = RecordingSink()
    task = start(backend, sink, running)
    await asyncio.sleep(0.3)  # a missing stream is waited for, not an error
    assert not task.done() and sink.events == []
    await backend.create_stream()
    await eventually(lambda: ("caught_up", TABLE, 0) in sink.events, what="caught up on the empty stream")
    await backend.publish(TABLE, Batches().transaction(insert(row(1))))
    await eventually(lambda: len(sink.messages) == 1, what="the first message")


async def test_tables_are_independent(backend: Backend, running: list[asyncio.Task[None]]) -> None:
    await backend.create_stream()
    for i in range(3):
        await backend.publish(TABLE, Batches().transaction(insert(row(i))))
    sink = RecordingSink()
    start(backend, sink, running, tables=(TABLE, OTHER))
    await eventually(lambda: {("caught_up", TABLE, 0), ("caught_up", OTHER, 0)} <= set(sink.events),
                     what="both tables caught up")
    assert len(sink.batches(TABLE)) == 3 and sink.batches(OTHER) == []
    await backend.publish(OTHER, Batches(table=OTHER).transaction(insert(row(9))))
    await eventually(lambda: len(sink.batches(OTHER)) == 1, what="the other table's message")
    assert sink.batches(OTHER)[0].batch.table == OTHER


async def test_a_sink_failure_ends_the_run_with_that_error(
        backend: Backend, running: list[asyncio.Task[None]]) -> None:
    await backend.create_stream()
    for i in range(3):
        await backend.publish(TABLE, Batches().transaction(insert(row(i))))
    task = start(backend, RecordingSink(fail_on=2), running)
    await eventually(task.done, what="the run to end")
    with pytest.raises(RuntimeError, match="sink failure"):
        task.result()


async def test_starts_after_a_stream_sequence(
        backend: Backend, running: list[asyncio.Task[None]]) -> None:
    await backend.create_stream()
    batches = Batches()
    for i in range(1, 5):
        await backend.publish(TABLE, batches.transaction(insert(row(i))))
    probe = RecordingSink()
    first = start(backend, probe, running)
    await eventually(lambda: len(probe.messages) == 4, what="every message once")
    first.cancel()
    sink = RecordingSink()
    after = probe.messages[1].stream_sequence
    task = asyncio.create_task(backend.feed.run([FeedSubscription(SOURCE, TABLE, after)], sink))
    running.append(task)
    await eventually(lambda: ("caught_up", TABLE, 0) in sink.events, what="caught up after the start sequence")
    assert [m.batch.changes[0].new["id"] for m in sink.messages] == [3, 4]  # type: ignore[index]
    assert [e[0] for e in sink.events] == ["batch", "batch", "caught_up"]
    last = RecordingSink()
    running.append(asyncio.create_task(backend.feed.run(
        [FeedSubscription(SOURCE, TABLE, probe.messages[-1].stream_sequence)], last)))
    await eventually(lambda: last.events == [("caught_up", TABLE, 0)], what="caught up at once after the last one")


async def test_a_start_sequence_beyond_the_stream_is_a_mismatch(
        backend: Backend, running: list[asyncio.Task[None]]) -> None:
    await backend.create_stream()
    await backend.publish(TABLE, Batches().transaction(insert(row(1))))
    task = asyncio.create_task(backend.feed.run([FeedSubscription(SOURCE, TABLE, 1000)], RecordingSink()))
    running.append(task)
    await eventually(task.done, what="the run to end")
    with pytest.raises(StreamMismatch, match="before the restored snapshot's 1000: it was created again"):
        task.result()
