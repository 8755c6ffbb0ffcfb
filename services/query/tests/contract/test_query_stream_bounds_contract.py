"""The StreamBounds contract (laredo_query.ports), run against the in-memory fake and the real JetStream adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import nats
import pytest

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.stream import naming
from laredo_query.adapters.memory import MemoryChangeFeed
from laredo_core.stream.memory_bounds import MemoryStreamBoundsReader
from laredo_core.stream.nats_bounds import NatsStreamBoundsReader
from laredo_query.adapters.codec_stream_bounds import CodecStreamBounds
from laredo_query.domain.snapshot_choice import StreamStateUnavailable
from laredo_query.ports import StreamBounds
from services.query.tests.query_testkit import COLUMNS, SOURCE, TABLE, Batches, insert, row

OTHER = TableId("public", "other")
OTHER_COLUMNS = (ColumnInfo("code", 25, "text", not_null=True, primary_key_ordinal=1),)


class Backend(Protocol):
    bounds: StreamBounds

    async def publish(self, table: TableId, data: bytes) -> int: ...

    async def discard_through(self, sequence: int) -> None: ...

    async def remove_stream(self) -> None: ...


@dataclass
class MemoryBackend:
    feed: MemoryChangeFeed
    reader: MemoryStreamBoundsReader
    bounds: CodecStreamBounds

    async def publish(self, table: TableId, data: bytes) -> int:
        return self.feed.publish(table, data)

    async def discard_through(self, sequence: int) -> None:
        self.feed.discard_through(sequence)

    async def remove_stream(self) -> None:
        self.reader.missing = True


@dataclass
class NatsBackend:
    js: Any
    prefix: str
    bounds: CodecStreamBounds

    @property
    def stream(self) -> str:
        return naming.stream_name(self.prefix, SOURCE)

    async def publish(self, table: TableId, data: bytes) -> int:
        return (await self.js.publish(naming.table_subject(self.prefix, SOURCE, table), data)).seq

    async def discard_through(self, sequence: int) -> None:
        await self.js.purge_stream(self.stream, seq=sequence + 1)  # keeps sequence + 1 and later

    async def remove_stream(self) -> None:
        await self.js.delete_stream(self.stream)


@pytest.fixture(params=["memory", "nats"])
async def backend(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[Backend]:
    if request.param == "memory":
        feed = MemoryChangeFeed(json_values=True)
        reader = MemoryStreamBoundsReader(feed)
        yield MemoryBackend(feed, reader, CodecStreamBounds(reader))
        return
    nats_url = request.getfixturevalue("nats_url")
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(name=naming.stream_name(unique_name, SOURCE),
                        subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    bounds = CodecStreamBounds(NatsStreamBoundsReader([nats_url], unique_name))
    try:
        yield NatsBackend(js, unique_name, bounds)
    finally:
        await bounds.aclose()
        try:
            await js.delete_stream(naming.stream_name(unique_name, SOURCE))
        except nats.js.errors.NotFoundError:
            pass
        await nc.close()


async def test_the_table_subjects_last_message_and_its_columns(backend: Backend) -> None:
    batches = Batches()
    empty = await backend.bounds.state(SOURCE, TABLE)
    assert (empty.last_sequence, empty.table_last_sequence, empty.columns) == (0, 0, ())
    assert empty.first_sequence <= 1
    for data in batches.baseline([row(i) for i in range(1, 4)]):
        await backend.publish(TABLE, data)
    last_of_table = await backend.publish(TABLE, batches.transaction(insert(row(4))))
    other = await backend.publish(OTHER, Batches(table=OTHER, columns=OTHER_COLUMNS).transaction(
        Batches(table=OTHER, columns=OTHER_COLUMNS).insert({"code": "a"})))
    state = await backend.bounds.state(SOURCE, TABLE)
    assert (state.first_sequence, state.last_sequence, state.table_last_sequence) == (1, other, last_of_table)
    assert state.columns == COLUMNS and state.key_columns == ("id",)
    assert (await backend.bounds.state(SOURCE, OTHER)).key_columns == ("code",)
    nothing = await backend.bounds.state(SOURCE, TableId("public", "never"))
    assert (nothing.table_last_sequence, nothing.columns, nothing.last_sequence) == (0, (), other)


async def test_removed_messages_move_the_first_sequence(backend: Backend) -> None:
    batches = Batches()
    sequences = [await backend.publish(TABLE, batches.transaction(insert(row(i)))) for i in range(1, 6)]
    await backend.discard_through(sequences[2])
    state = await backend.bounds.state(SOURCE, TABLE)
    assert (state.first_sequence, state.last_sequence, state.table_last_sequence) == (
        sequences[3], sequences[4], sequences[4])
    await backend.discard_through(sequences[4])
    gone = await backend.bounds.state(SOURCE, TABLE)
    assert (gone.first_sequence, gone.last_sequence, gone.table_last_sequence, gone.columns) == (
        sequences[4] + 1, sequences[4], 0, ())


async def test_a_missing_stream_is_not_retryable(backend: Backend) -> None:
    await backend.remove_stream()
    with pytest.raises(StreamStateUnavailable) as missing:
        await backend.bounds.state(SOURCE, TABLE)
    assert not missing.value.retryable and "does not exist" in str(missing.value)
    await backend.bounds.aclose()


async def test_an_unreachable_server_is_retryable(unique_name: str) -> None:
    bounds = CodecStreamBounds(NatsStreamBoundsReader(["nats://127.0.0.1:1"], unique_name))
    with pytest.raises(StreamStateUnavailable) as unreachable:
        await bounds.state(SOURCE, TABLE)
    assert unreachable.value.retryable and "cannot reach NATS" in str(unreachable.value)
    reader = MemoryStreamBoundsReader(MemoryChangeFeed(json_values=True))
    memory = CodecStreamBounds(reader)
    reader.unreachable = 1
    with pytest.raises(StreamStateUnavailable) as injected:
        await memory.state(SOURCE, TABLE)
    assert injected.value.retryable and (await memory.state(SOURCE, TABLE)).last_sequence == 0
