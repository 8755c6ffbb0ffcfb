"""Per-client send buffers: the queue itself, and both policies with a client that stops reading."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from laredo_testing.eventually import eventually

from laredo_fanout.adapters.memory import MemoryChangeFeed
from laredo_fanout.application.client_registry import ClientState
from laredo_fanout.application.send_buffer import Outgoing, SendBuffer, first_done
from laredo_fanout.domain.client_buffer import BufferLimits, BufferPolicy
from laredo_fanout.domain.errors import ClientTooSlow
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import as_client_rows, insert, row

MakeWorld = Callable[..., World]


async def test_buffer_holds_a_few_messages_and_counts_their_entries_until_written() -> None:
    buffer = SendBuffer(read_ahead=2)
    assert buffer.offer(Outgoing(b"a", entries=10)) and buffer.offer(Outgoing(b"b", entries=1))
    assert not buffer.has_room() and not buffer.offer(Outgoing(b"c", entries=1))
    buffer.push(Outgoing(b"control"))  # control messages always go in
    room = buffer.room()
    first = await buffer.get()
    assert first.message == b"a" and buffer.depth == 11  # being written: still counted
    await asyncio.sleep(0)
    assert not room.done()
    buffer.written(first)
    assert room.done() and buffer.depth == 1
    second, third = await buffer.get(), await buffer.get()
    assert [second.message, third.message] == [b"b", b"control"]
    buffer.written(second)
    buffer.written(third)
    assert buffer.offer(Outgoing(b"d", entries=2))
    waiting = asyncio.ensure_future(buffer.get())
    await asyncio.sleep(0)
    assert waiting.done() and waiting.result().message == b"d"


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BufferLimits(0)


def publish_changes(world: World, first: int, count: int) -> None:
    for i in range(first, first + count):
        world.publish(world.batches.transaction(insert(row(i))))


async def test_drop_disconnect_ends_a_stuck_client_and_nobody_else_waits(make_world: MakeWorld) -> None:
    """Changes arrive one by one (as from a steady source): readers keep up, the stuck client's buffer fills."""
    world = make_world(buffer_max_size=5, feed=MemoryChangeFeed(delivery_delay=0.002))
    world.publish(world.batches.baseline([row(i) for i in range(1, 4)]))
    world.start()
    stuck, stuck_task = world.sync_client(client_id="stuck")
    others = [world.sync_client(client_id=f"reader-{i}")[0] for i in range(5)]
    await eventually(lambda: all(c.state is ClientState.LIVE for c in world.replica.clients.clients()) and
                     len(world.replica.clients) == 6, what="every client live")
    stuck.stop_reading()
    publish_changes(world, 10, 40)
    with pytest.raises(ClientTooSlow, match="client stuck is too slow: its send buffer of 5 entries is full"):
        await asyncio.wait_for(stuck_task, 5)
    await eventually(lambda: world.replica.journal.current_sequence == 43, what="every change applied")
    expected = as_client_rows([dict(world.replica.state.values_of(r)) for r in world.replica.state.rows()])
    for client in others:
        await eventually(lambda c=client: c.replica.rows == expected, what="every reader to get every change")
    assert len(world.replica.clients) == 5


async def test_slow_down_feeds_a_slow_client_at_its_pace(make_world: MakeWorld) -> None:
    world = make_world(buffer_max_size=4, buffer_policy=BufferPolicy.SLOW_DOWN,
                       feed=MemoryChangeFeed(delivery_delay=0.002))
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    slow, task = world.sync_client(client_id="slow")
    reader, _ = world.sync_client(client_id="reader")
    await eventually(lambda: [c.state for c in world.replica.clients.clients()] == [ClientState.LIVE] * 2,
                     what="both live")
    slow.stop_reading()
    publish_changes(world, 10, 30)
    await eventually(lambda: reader.replica.sequences[-1:] == [31], what="the reader to get everything")
    status = {c.client_id: c for c in world.replica.clients.clients()}
    assert status["slow"].state is ClientState.BACKPRESSURED and status["slow"].lag(31) == 30
    assert status["slow"].buffer_depth == 30 and status["reader"].buffer_depth == 0  # 30 one-entry messages queued
    slow.resume_reading()
    await eventually(lambda: slow.replica.rows == reader.replica.rows, what="the slow client to catch up")
    assert slow.replica.sequences == list(range(2, 32)) and not task.done()


async def test_first_done_wakes_on_either_future_or_the_timeout_and_never_cancels_a_shared_one() -> None:
    loop = asyncio.get_running_loop()
    shared, other = loop.create_future(), loop.create_future()
    assert await first_done((shared, other), 0.01) is False  # the timeout
    waiting = asyncio.ensure_future(first_done((shared, other)))
    await asyncio.sleep(0)
    other.set_result(None)
    assert await waiting is True and not shared.done()
    cancelled = asyncio.ensure_future(first_done((shared,)))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not shared.cancelled() and not shared.done(), "a waiter that leaves leaves the shared future alone"
    shared.set_result(None)
    assert await first_done((shared,), 5) is True
