"""DeadLetterWriter: letters are stored in order in the background, survive a store outage, and a full queue
drops (and counts) instead of blocking."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from laredo_testing.eventually import eventually

from laredo_kernel.changes import TableId
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.writer import DeadLetterWriter

PIPELINE = PipelineId("pg", TableId("public", "items"), "indexed-memory")


def letter(n: int) -> DeadLetter:
    return DeadLetter(PIPELINE, f"s{n}-m", f"failure {n}", b"x", stream_sequence=n)


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def stored_ids(store: InMemoryDeadLetterStore) -> list[str]:
    return [x.letter_id for x in (await store.list(PIPELINE)).letters]


async def test_letters_are_stored_in_the_order_they_were_submitted(running: list[asyncio.Task[None]]) -> None:
    store = InMemoryDeadLetterStore()
    writer = DeadLetterWriter(store)
    running.append(asyncio.create_task(writer.run()))
    assert all(writer.submit(letter(n)) for n in range(5))
    await asyncio.wait_for(writer.idle(), 5)
    assert await stored_ids(store) == [f"s{n}-m" for n in range(5)]
    assert (writer.stats.written, writer.stats.dropped, writer.pending) == (5, 0, 0)


async def test_an_unavailable_store_delays_letters_without_losing_them(running: list[asyncio.Task[None]],
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryDeadLetterStore(available=False)
    writer = DeadLetterWriter(store, initial_backoff=0.01, max_backoff=0.02)
    running.append(asyncio.create_task(writer.run()))
    writer.submit(letter(1))
    writer.submit(letter(2))
    await eventually(lambda: writer.stats.retries >= 3, what="retries during the outage")
    assert writer.pending == 2 and "dead-letter store unavailable" in caplog.text
    store.available = True
    await asyncio.wait_for(writer.idle(), 5)
    assert await stored_ids(store) == ["s1-m", "s2-m"] and writer.stats.dropped == 0


async def test_a_full_queue_drops_the_new_letter_and_says_where_its_change_is(
        running: list[asyncio.Task[None]], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    store = InMemoryDeadLetterStore(available=False)
    writer = DeadLetterWriter(store, max_queue=2, initial_backoff=0.01, max_backoff=0.02)
    assert writer.submit(letter(1)) and writer.submit(letter(2))
    assert not writer.submit(letter(3)), "never blocks: the third does not fit"
    assert writer.stats.dropped == 1 and writer.pending == 2
    assert "dead letter s3-m of pg:public.items:indexed-memory NOT stored" in caplog.text
    assert "stream sequence 3" in caplog.text and "failure 3" in caplog.text
    store.available = True
    running.append(asyncio.create_task(writer.run()))
    await asyncio.wait_for(writer.idle(), 5)
    assert await stored_ids(store) == ["s1-m", "s2-m"]
