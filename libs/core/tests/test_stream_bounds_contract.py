"""The StreamBoundsReader contract (laredo_core.stream.bounds), run against the in-memory fake and JetStream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import nats
import pytest

from laredo_kernel.changes import TableId
from laredo_core.stream import naming
from laredo_core.stream.bounds import StreamBoundsReader, StreamBoundsUnavailable
from laredo_core.stream.memory_bounds import MemoryStreamBoundsReader
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_core.stream.nats_bounds import NatsStreamBoundsReader

SOURCE = "pg"
TABLE = TableId("public", "items")
OTHER = TableId("public", "other")


class Backend(Protocol):
    reader: StreamBoundsReader

    async def publish(self, table: TableId, data: bytes) -> int: ...

    async def discard_through(self, sequence: int) -> None: ...

    async def remove_stream(self) -> None: ...


class MemoryBackend:
    def __init__(self) -> None:
        self.feed = MemoryChangeFeed()
        self.reader = MemoryStreamBoundsReader(self.feed)

    async def publish(self, table: TableId, data: bytes) -> int:
        return self.feed.publish(table, data)

    async def discard_through(self, sequence: int) -> None:
        self.feed.discard_through(sequence)

    async def remove_stream(self) -> None:
        self.reader.missing = True


class NatsBackend:
    def __init__(self, reader: NatsStreamBoundsReader, js: Any, prefix: str) -> None:
        self.reader, self.js, self.stream = reader, js, naming.stream_name(prefix, SOURCE)
        self.prefix = prefix

    async def publish(self, table: TableId, data: bytes) -> int:
        return int((await self.js.publish(naming.table_subject(self.prefix, SOURCE, table), data)).seq)

    async def discard_through(self, sequence: int) -> None:
        await self.js.purge_stream(self.stream, seq=sequence + 1)  # keeps sequence + 1 and later

    async def remove_stream(self) -> None:
        await self.js.delete_stream(self.stream)


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.integration)])
async def backend(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[Backend]:
    if request.param == "memory":
        yield MemoryBackend()
        return
    nats_url = request.getfixturevalue("nats_url")
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = naming.stream_name(unique_name, SOURCE)
    await js.add_stream(name=stream, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    reader = NatsStreamBoundsReader([nats_url], unique_name)
    try:
        yield NatsBackend(reader, js, unique_name)
    finally:
        await reader.aclose()
        try:
            await js.delete_stream(stream)
        except nats.js.errors.NotFoundError:
            pass
        await nc.close()


async def test_the_stream_bounds_and_the_subjects_last_message(backend: Backend) -> None:
    empty = await backend.reader.bounds(SOURCE, TABLE)
    assert (empty.first_sequence, empty.last_sequence, empty.subject_last_sequence) == (1, 0, 0)
    assert empty.subject_last_message == b""
    first = await backend.publish(TABLE, b"one")
    last_of_table = await backend.publish(TABLE, b"two")
    other = await backend.publish(OTHER, b"three")
    bounds = await backend.reader.bounds(SOURCE, TABLE)
    assert (bounds.first_sequence, bounds.last_sequence) == (first, other)
    assert (bounds.subject_last_sequence, bounds.subject_last_message) == (last_of_table, b"two")
    never = await backend.reader.bounds(SOURCE, TableId("public", "never"))
    assert (never.last_sequence, never.subject_last_sequence, never.subject_last_message) == (other, 0, b"")


async def test_removed_messages_move_the_first_sequence_past_the_last_when_none_is_left(backend: Backend) -> None:
    sequences = [await backend.publish(TABLE, f"m{i}".encode()) for i in range(4)]
    await backend.discard_through(sequences[1])
    kept = await backend.reader.bounds(SOURCE, TABLE)
    assert (kept.first_sequence, kept.last_sequence, kept.subject_last_sequence) == (
        sequences[2], sequences[3], sequences[3])
    await backend.discard_through(sequences[3])
    gone = await backend.reader.bounds(SOURCE, TABLE)
    assert (gone.first_sequence, gone.last_sequence, gone.subject_last_sequence) == (
        sequences[3] + 1, sequences[3], 0)


async def test_a_missing_stream_is_not_retryable(backend: Backend) -> None:
    await backend.remove_stream()
    with pytest.raises(StreamBoundsUnavailable, match="does not exist") as missing:
        await backend.reader.bounds(SOURCE, TABLE)
    assert not missing.value.retryable


async def test_an_unreachable_server_is_retryable(unique_name: str) -> None:
    reader = NatsStreamBoundsReader(["nats://127.0.0.1:1"], unique_name)
    with pytest.raises(StreamBoundsUnavailable, match="cannot reach NATS") as unreachable:
        await reader.bounds(SOURCE, TABLE)
    assert unreachable.value.retryable
    memory = MemoryStreamBoundsReader(MemoryChangeFeed())
    memory.unreachable = 1
    with pytest.raises(StreamBoundsUnavailable) as injected:
        await memory.bounds(SOURCE, TABLE)
    assert injected.value.retryable and (await memory.bounds(SOURCE, TABLE)).last_sequence == 0
    assert memory.calls == 2
