"""The ChangeTail contract (laredo_oam.ports), run against the in-memory fake and the JetStream adapter."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import nats
import pytest
from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_testing import stream
from laredo_testing.eventually import eventually

from laredo_kernel.changes import Action, ColumnInfo, TableId
from laredo_core.stream import naming

from laredo_oam.adapters.memory import MemoryChangeTail
from laredo_oam.adapters.nats_change_tail import NatsChangeTail, observed_changes
from laredo_oam.domain.watch import ObservedChange
from laredo_oam.ports import ChangeTail, TailTopic

SOURCE = "pg"
TABLE, OTHER = TableId("public", "items"), TableId("public", "other")
COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           ColumnInfo("name", 25, "text"))
_KINDS = {spb.BATCH_KIND_TRANSACTION: "TRANSACTION", spb.BATCH_KIND_BASELINE_BEGIN: "BASELINE_BEGIN",
          spb.BATCH_KIND_BASELINE_ROWS: "BASELINE_ROWS", spb.BATCH_KIND_BASELINE_END: "BASELINE_END"}


def batches(table: TableId) -> stream.Batches:
    return stream.Batches(table, COLUMNS)


def transaction(table: TableId, row: dict[str, Any]) -> bytes:
    builder = batches(table)
    return builder.transaction(builder.insert(row))


class Backend(Protocol):
    tail: ChangeTail

    async def publish(self, table: TableId, data: bytes) -> None: ...

    async def following(self, consumers: int) -> None:
        """Return once the tail's consumers are in place (messages published from then on are delivered)."""


@dataclass
class MemoryBackend:
    tail: MemoryChangeTail = field(default_factory=MemoryChangeTail)

    async def publish(self, table: TableId, data: bytes) -> None:
        self.tail.publish(observed_changes(SOURCE, data))

    async def following(self, consumers: int) -> None:
        await eventually(lambda: self.tail.running, what="the memory tail running")


@dataclass
class NatsBackend:
    tail: NatsChangeTail
    nc: Any
    prefix: str

    @property
    def stream(self) -> str:
        return naming.stream_name(self.prefix, SOURCE)

    async def create_stream(self) -> None:
        await self.nc.jetstream().add_stream(name=self.stream,
                                             subjects=[naming.source_subject_filter(self.prefix, SOURCE)])

    async def publish(self, table: TableId, data: bytes) -> None:
        kind = _KINDS[spb.ChangeBatch.FromString(data).kind]
        await self.nc.jetstream().publish(naming.table_subject(self.prefix, SOURCE, table), data,
                                          headers={naming.HEADER_KIND: kind})

    async def following(self, consumers: int) -> None:
        async def in_place() -> bool:
            return (await self.nc.jetstream().stream_info(self.stream)).state.consumer_count == consumers

        await eventually(in_place, what=f"{consumers} consumer(s) on {self.stream}")


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.integration)])
async def backend(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[Backend]:
    if request.param == "memory":
        yield MemoryBackend()
        return
    nats_url = request.getfixturevalue("nats_url")
    nc = await nats.connect(nats_url)
    nats_backend = NatsBackend(NatsChangeTail([nats_url], unique_name, initial_backoff=0.05, max_backoff=0.2), nc,
                               unique_name)
    await nats_backend.create_stream()
    try:
        yield nats_backend
    finally:
        await nc.jetstream().delete_stream(nats_backend.stream)
        await nc.close()


@dataclass
class Received:
    messages: list[list[ObservedChange]] = field(default_factory=list)

    def __call__(self, changes: Sequence[ObservedChange]) -> None:
        self.messages.append(list(changes))

    @property
    def changes(self) -> list[ObservedChange]:
        return [c for m in self.messages for c in m]


@pytest.fixture
async def tailing(backend: Backend) -> AsyncIterator[tuple[Backend, Received]]:
    received = Received()
    task = asyncio.create_task(backend.tail.run(received))
    try:
        yield backend, received
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_followed_table_delivers_its_transactions_in_order_and_nothing_else(tailing) -> None:
    backend, received = tailing
    backend.tail.follow(frozenset({TailTopic(SOURCE, TABLE)}))
    await backend.following(1)
    items, other = batches(TABLE), batches(OTHER)
    for data in items.baseline([{"id": 1, "name": "a"}]):
        await backend.publish(TABLE, data)
    await backend.publish(OTHER, other.transaction(other.insert({"id": 9, "name": "x"})))
    await backend.publish(TABLE, items.transaction(items.insert({"id": 2}), items.delete({"id": 1})))
    await backend.publish(TABLE, items.transaction(items.update({"id": 2, "name": "b"})))
    await eventually(lambda: len(received.changes) >= 3, what="three changes of the followed table")
    assert [(c.source_id, c.table, c.action) for c in received.changes] == [
        (SOURCE, TABLE, Action.INSERT), (SOURCE, TABLE, Action.DELETE), (SOURCE, TABLE, Action.UPDATE)]
    assert [len(m) for m in received.messages] == [2, 1], "one sink call per stream message"
    positions = [c.position for c in received.changes]
    assert positions == sorted(positions) and [p.ordinal for p in positions] == [0, 1, 0]
    assert received.changes[0].xid == items.xid - 1 and received.changes[2].xid == items.xid


async def test_overlapping_topics_deliver_each_message_once(tailing) -> None:
    backend, received = tailing
    backend.tail.follow(frozenset({TailTopic(SOURCE), TailTopic(SOURCE, TABLE)}))
    await backend.following(2)
    await backend.publish(TABLE, transaction(TABLE, {"id": 1, "name": "a"}))
    await backend.publish(OTHER, transaction(OTHER, {"id": 2, "name": "b"}))
    await eventually(lambda: {c.table for c in received.changes} == {TABLE, OTHER}, what="both tables' changes")
    await backend.publish(OTHER, transaction(OTHER, {"id": 3, "name": "c"}))
    await eventually(lambda: len(received.changes) >= 3, what="a third change")
    assert [c.table for c in received.changes].count(TABLE) == 1


@pytest.mark.integration
async def test_a_table_followed_before_its_stream_exists_delivers_the_stream_from_its_start(
        nats_url: str, unique_name: str) -> None:
    nc = await nats.connect(nats_url)
    backend = NatsBackend(NatsChangeTail([nats_url], unique_name, initial_backoff=0.05, max_backoff=0.2), nc,
                          unique_name)
    received = Received()
    backend.tail.follow(frozenset({TailTopic(SOURCE, TABLE)}))
    task = asyncio.create_task(backend.tail.run(received))
    try:
        await backend.create_stream()  # ingest starts after the watcher
        await backend.publish(TABLE, transaction(TABLE, {"id": 1, "name": "a"}))  # maybe before the consumer
        await eventually(lambda: len(received.changes) == 1, what="the change published before the consumer")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await nc.jetstream().delete_stream(backend.stream)
        await nc.close()


@pytest.mark.integration
async def test_messages_the_nats_client_drops_as_a_slow_consumer_still_reach_watchers(
        nats_url: str, unique_name: str, caplog: pytest.LogCaptureFixture) -> None:
    """nats-py drops what overflows a subscription's pending limits and its ordered consumer goes on after the
    gap (or, its flow control dropped, stops): the tail notices the gap in the delivery sequence (or the stall) and
    follows again after the last message it took."""
    nc = await nats.connect(nats_url)
    tail = NatsChangeTail([nats_url], unique_name, pending_msgs_limit=32, pending_bytes_limit=1 << 20, stall_after=0.5)
    backend = NatsBackend(tail, nc, unique_name)
    await backend.create_stream()
    received: list[int] = []

    def slow_watcher(changes: Sequence[ObservedChange]) -> None:
        time.sleep(0.002)  # a watcher slower than NATS delivers
        received.extend(c.xid for c in changes)

    task = asyncio.create_task(backend.tail.run(slow_watcher))
    try:
        backend.tail.follow(frozenset({TailTopic(SOURCE, TABLE)}))
        await backend.following(1)
        builder, subject = batches(TABLE), naming.table_subject(unique_name, SOURCE, TABLE)
        for i in range(1, 301):  # stored as fast as the server takes them: no waiting for each acknowledgement
            await nc.publish(subject, builder.transaction(builder.insert({"id": i, "name": "x" * 200})),
                             headers={naming.HEADER_KIND: "TRANSACTION"})
        await nc.flush()
        await eventually(lambda: len(received) >= 300, timeout=60, what="every change despite the dropped messages")
        assert received == sorted(set(received)) and len(received) == 300, "in order, each once"
        assert "following again" in caplog.text, "the gap is said"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await nc.jetstream().delete_stream(backend.stream)
        await nc.close()
