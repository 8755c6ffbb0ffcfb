"""The StreamTail contract (laredo_core.rebuild.tail), run against the in-memory fake and the real JetStream adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import nats
import pytest
from laredo_testing import stream

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.rebuild.tail import StreamTail, TailUnavailable
from laredo_core.stream import naming
from laredo_core.stream.feed import FeedMessage
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_core.stream.memory_tail import MemoryStreamTail
from laredo_core.stream.nats_tail import NatsStreamTail

SOURCE = "pg"
TABLE = TableId("public", "items")
OTHER = TableId("public", "other")
COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           ColumnInfo("price", 1700, "numeric"))


@dataclass
class Batches(stream.Batches):
    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS


class Backend(Protocol):
    tail: StreamTail

    async def publish(self, table: TableId, data: bytes) -> int: ...

    async def discard_through(self, sequence: int) -> None: ...


class MemoryBackend:
    def __init__(self, json_values: bool) -> None:
        self.feed = MemoryChangeFeed(json_values=json_values)
        self.tail = MemoryStreamTail(self.feed, json_values=json_values)

    async def publish(self, table: TableId, data: bytes) -> int:
        return self.feed.publish(table, data)

    async def discard_through(self, sequence: int) -> None:
        self.feed.discard_through(sequence)


class NatsBackend:
    def __init__(self, tail: NatsStreamTail, nc: Any, prefix: str) -> None:
        self.tail, self.nc, self.prefix = tail, nc, prefix

    async def publish(self, table: TableId, data: bytes) -> int:
        ack = await self.nc.jetstream().publish(naming.table_subject(self.prefix, SOURCE, table), data)
        return int(ack.seq)

    async def discard_through(self, sequence: int) -> None:
        await self.nc.jetstream().purge_stream(naming.stream_name(self.prefix, SOURCE), keep=None,
                                               seq=sequence + 1)


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
    stream_name = naming.stream_name(unique_name, SOURCE)
    await nc.jetstream().add_stream(name=stream_name, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    tail = NatsStreamTail([nats_url], unique_name, json_values=json_values, batch=3, fetch_timeout=0.5)
    try:
        yield NatsBackend(tail, nc, unique_name)
    finally:
        await tail.aclose()
        await nc.jetstream().delete_stream(stream_name)
        await nc.close()


def insert(i: int) -> bytes:
    return Batches().transaction(Batches().insert({"id": i, "price": f"{i}.50"}))


async def read(tail: StreamTail, after: int, up_to: int, table: TableId = TABLE) -> list[FeedMessage]:
    return [m async for m in tail.read(SOURCE, table, after, up_to)]


async def published(backend: Backend, count: int) -> list[int]:
    """`count` inserts into TABLE interleaved with as many into OTHER; the sequences of TABLE's messages."""
    other = Batches(table=OTHER)
    sequences = []
    for i in range(1, count + 1):
        sequences.append(await backend.publish(TABLE, insert(i)))
        await backend.publish(OTHER, other.transaction(other.insert({"id": i, "price": "1"})))
    return sequences


async def test_reads_the_tables_messages_between_two_sequences_in_order(backend: Backend, json_values: bool) -> None:
    sequences = await published(backend, 8)
    messages = await read(backend.tail, sequences[1], sequences[6])
    assert [m.stream_sequence for m in messages] == sequences[2:7]
    assert all(m.table == TABLE for m in messages)
    first = messages[0].batch.changes[0].new
    assert first is not None and first["id"] == 3
    assert str(first["price"]) == "3.50" and isinstance(first["price"], str) is json_values


async def test_reads_up_to_a_sequence_of_another_table_and_from_the_start(backend: Backend) -> None:
    sequences = await published(backend, 4)
    up_to_other = sequences[2] + 1  # OTHER's message after TABLE's third
    assert [m.stream_sequence for m in await read(backend.tail, 0, up_to_other)] == sequences[:3]


async def test_nothing_when_there_is_nothing_after(backend: Backend) -> None:
    sequences = await published(backend, 2)
    assert await read(backend.tail, sequences[1], sequences[1]) == []
    assert await read(backend.tail, sequences[1], sequences[0]) == []


async def test_a_stream_that_ends_before_up_to_is_unavailable(backend: Backend) -> None:
    sequences = await published(backend, 2)
    with pytest.raises(TailUnavailable, match="ends at sequence"):
        await read(backend.tail, 0, sequences[-1] + 10)


async def test_removed_messages_after_the_start_make_it_unavailable(backend: Backend) -> None:
    sequences = await published(backend, 4)
    await backend.discard_through(sequences[1])
    with pytest.raises(TailUnavailable, match="starts at sequence"):
        await read(backend.tail, sequences[0], sequences[3])
    assert [m.stream_sequence for m in await read(backend.tail, sequences[1], sequences[3])] == sequences[2:]


async def test_undecodable_messages_are_skipped(backend: Backend) -> None:
    first = await backend.publish(TABLE, insert(1))
    await backend.publish(TABLE, b"\xff\x00 not a ChangeBatch")
    last = await backend.publish(TABLE, insert(3))
    assert [m.stream_sequence for m in await read(backend.tail, 0, last)] == [first, last]
