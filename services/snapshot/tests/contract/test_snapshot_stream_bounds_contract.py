"""The StreamBounds port: the same answers from JetStream and from the in-memory fake."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from services.snapshot.tests.snapshot_testkit import SOURCE, TABLE, Batches, jetstream, row

from laredo_kernel.changes import TableId
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_snapshot.adapters.memory import MemoryStreamBounds
from laredo_snapshot.adapters.nats_stream_bounds import NatsStreamBounds
from laredo_snapshot.domain.errors import StreamUnavailable
from laredo_snapshot.ports import StreamBounds
from laredo_testing.process import free_port

OTHER = TableId("public", "other")
pytestmark = pytest.mark.integration


@dataclass
class Fixture:
    bounds: StreamBounds
    publish: Callable[..., object]
    purge_through: Callable[[int], object]


@pytest.fixture(params=["memory", "nats"])
async def fixture(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[Fixture]:
    if request.param == "memory":
        feed = MemoryChangeFeed(json_values=True)

        async def publish(table: TableId, *messages: bytes) -> None:
            for message in messages:
                feed.publish(table, message)

        async def purge(sequence: int) -> None:
            feed.discard_through(sequence)

        yield Fixture(MemoryStreamBounds(feed, "memory"), publish, purge)
        return
    nats_url = request.getfixturevalue("nats_url")
    async with jetstream(nats_url, unique_name) as stream:
        bounds = NatsStreamBounds([nats_url], unique_name)

        async def publish(table: TableId, *messages: bytes) -> None:
            await stream.publish(*messages, table=table)

        async def purge(sequence: int) -> None:
            await stream.js.purge_stream(stream.name, seq=sequence + 1)

        yield Fixture(bounds, publish, purge)
        await bounds.aclose()


async def test_bounds_follow_the_stream_and_the_tables_subject(fixture: Fixture) -> None:
    empty = await fixture.bounds.bounds(SOURCE, TABLE)
    assert (empty.last_sequence, empty.table_last_sequence) == (0, 0)
    b, other = Batches(), Batches(table=OTHER)
    await fixture.publish(TABLE, *b.baseline([row(1)]))  # sequences 1-3
    await fixture.publish(OTHER, *other.baseline([row(1)]))  # 4-6
    bounds = await fixture.bounds.bounds(SOURCE, TABLE)
    assert (bounds.first_sequence, bounds.last_sequence, bounds.table_last_sequence) == (1, 6, 3)
    await fixture.purge_through(2)
    bounds = await fixture.bounds.bounds(SOURCE, TABLE)
    assert (bounds.first_sequence, bounds.last_sequence, bounds.table_last_sequence) == (3, 6, 3)


async def test_a_missing_stream_is_unavailable(nats_url: str, unique_name: str) -> None:
    bounds = NatsStreamBounds([nats_url], unique_name)
    try:
        with pytest.raises(StreamUnavailable, match="does not exist.*cannot be compacted yet"):
            await bounds.bounds(SOURCE, TABLE)
    finally:
        await bounds.aclose()
    fake = MemoryStreamBounds(MemoryChangeFeed())
    fake.unavailable = True
    with pytest.raises(StreamUnavailable):
        await fake.bounds(SOURCE, TABLE)


async def test_an_unreachable_nats_is_asked_again_then_unavailable(unique_name: str) -> None:
    bounds = NatsStreamBounds([f"nats://127.0.0.1:{free_port()}"], unique_name, attempts=2, retry_wait=0)
    try:
        with pytest.raises(StreamUnavailable, match="cannot reach NATS"):
            await bounds.bounds(SOURCE, TABLE)
    finally:
        await bounds.aclose()
