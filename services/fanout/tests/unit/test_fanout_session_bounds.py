"""Every phase of a Sync stream is bounded: a client that stops reading during its snapshot or catch-up cannot
hold the journal beyond client_buffer.max_size entries or client_buffer.catch_up_timeout; GoAway reaches it in
every phase; a filtered client's lag counts what it was offered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from laredo_testing.eventually import eventually

from laredo_fanout.adapters.memory import MemoryChangeFeed
from laredo_fanout.application.client_registry import ClientState
from laredo_fanout.domain.client_buffer import (
    BufferLimits,
    BufferPolicy,
    LagAction,
    client_lag,
    lag_action,
    pin_expired,
)
from laredo_fanout.domain.errors import ClientFellBehind, ClientTooSlow
from laredo_fanout.domain.subscription_filter import FieldPredicate, MatchKind
from services.fanout.tests.conftest import ClientWriter, World
from services.fanout.tests.fanout_testkit import as_client_rows, insert, row

MakeWorld = Callable[..., World]
DROP, SLOW = BufferPolicy.DROP_DISCONNECT, BufferPolicy.SLOW_DOWN


@pytest.mark.parametrize(("policy", "lag", "action"), [
    (DROP, 10, LagAction.WITHIN),
    (DROP, 11, LagAction.DISCONNECT),
    (SLOW, 10, LagAction.WITHIN),
    (SLOW, 11, LagAction.SLOW_DOWN),
])
def test_lag_action_is_the_policy_beyond_max_size(policy: BufferPolicy, lag: int, action: LagAction) -> None:
    assert lag_action(BufferLimits(10, policy), lag) is action


@pytest.mark.parametrize(("current", "offered", "queued", "joined", "lag"), [
    (100, 100, 0, 0, 0),  # offered everything, written everything
    (100, 90, 5, 0, 15),  # ten not offered, five offered and waiting to be written
    (100, 100, 1, 0, 1),  # a filter skipped the rest: only the one written entry counts
    (90, 100, 0, 0, 0),  # never negative
    (100, 20, 64, 80, 20),  # catching up: only what was appended since it joined (at 80) counts
    (100, 90, 5, 80, 15),  # past its backlog: as any live client
])
def test_client_lag_counts_entries_not_offered_and_offered_not_written(current: int, offered: int, queued: int,
                                                                       joined: int, lag: int) -> None:
    assert client_lag(current, offered, queued, joined) == lag


def test_pin_expires_after_catch_up_timeout_unless_it_is_zero() -> None:
    assert not pin_expired(BufferLimits(catch_up_timeout=5), 4.9)
    assert pin_expired(BufferLimits(catch_up_timeout=5), 5.0)
    assert not pin_expired(BufferLimits(catch_up_timeout=0), 1e9)
    with pytest.raises(ValueError, match="catch_up_timeout must not be negative"):
        BufferLimits(catch_up_timeout=-1)


def started(make_world: MakeWorld, rows: int, **options: object) -> World:
    world = make_world(feed=MemoryChangeFeed(delivery_delay=0.001), **options)
    world.publish(world.batches.baseline([row(i) for i in range(1, rows + 1)]))
    world.start()
    return world


def publish_changes(world: World, first: int, count: int) -> None:
    for i in range(first, first + count):
        world.publish(world.batches.transaction(insert(row(i))))


def stuck_client(world: World, **request: object) -> tuple[ClientWriter, asyncio.Task[None]]:
    """A batched client (one message read ahead) that reads nothing after it connects."""
    client, task = world.sync_client(max_batch_size=10, **request)
    client.stop_reading()
    return client, task


async def test_a_client_stuck_in_its_snapshot_is_dropped_and_the_journal_stays_bounded(make_world: MakeWorld) -> None:
    world = started(make_world, rows=50, journal_max_entries=5, buffer_max_size=10)
    await eventually(lambda: world.replica.ready, what="the table ready")
    reader, _ = world.sync(client_id="reader")
    stuck, task = stuck_client(world, client_id="stuck")
    await eventually(lambda: len(world.replica.clients) == 2, what="both clients connected")
    publish_changes(world, 100, 40)
    with pytest.raises(ClientTooSlow, match=r"client stuck is too slow: its send buffer of 10 entries is full during "
                                            r"its snapshot .* reconnect to sync again"):
        await asyncio.wait_for(task, 5)
    await eventually(lambda: world.replica.journal.current_sequence == 90, what="every change applied")
    assert len(world.replica.journal) == 5  # nothing pins it any more
    await eventually(lambda: reader.sequences[-1:] == [90], what="the reader to get every change")
    assert reader.rows == as_client_rows([dict(world.replica.state.values_of(r)) for r in world.replica.state.rows()])
    assert [c.client_id for c in world.replica.clients.clients()] == ["reader"]


async def test_a_client_stuck_in_its_catch_up_is_dropped(make_world: MakeWorld) -> None:
    """Its backlog (30 entries) is more than max_size; only what is appended after it joined counts."""
    world = started(make_world, rows=3, journal_max_entries=100, buffer_max_size=10)
    publish_changes(world, 100, 30)
    await eventually(lambda: world.replica.journal.current_sequence == 33, what="30 changes applied")
    position = str(world.replica.journal.entries_after(2, 1)[0].position)
    _, task = stuck_client(world, client_id="stuck", last_known_source_position=position)
    await eventually(lambda: len(world.replica.clients) == 1, what="the client connected")
    await asyncio.sleep(0)
    assert not task.done(), "a catch-up longer than max_size is not by itself too slow"
    publish_changes(world, 200, 20)
    with pytest.raises(ClientTooSlow, match="is full during its catch-up .* reconnect to resume after sequence 3"):
        await asyncio.wait_for(task, 5)


async def test_a_reading_client_catches_up_a_backlog_larger_than_max_size(make_world: MakeWorld) -> None:
    world = started(make_world, rows=3, buffer_max_size=5)
    publish_changes(world, 100, 30)
    await eventually(lambda: world.replica.journal.current_sequence == 33, what="30 changes applied")
    client, _ = world.sync(client_id="delta", last_known_source_position=str(
        world.replica.journal.entries_after(3, 1)[0].position), max_batch_size=2)
    await eventually(lambda: client.sequences == list(range(5, 34)), what="the whole backlog")


async def test_slow_down_releases_the_pin_and_ends_the_client_once_pruning_passes_it(make_world: MakeWorld) -> None:
    world = started(make_world, rows=50, journal_max_entries=5, buffer_max_size=10, buffer_policy=SLOW)
    await eventually(lambda: world.replica.ready, what="the table ready")
    _, task = stuck_client(world, client_id="stuck")
    await eventually(lambda: len(world.replica.clients) == 1, what="the client connected")
    publish_changes(world, 100, 40)
    with pytest.raises(ClientFellBehind, match="client stuck fell behind: it needs journal entries after sequence 50"):
        await asyncio.wait_for(task, 5)
    await eventually(lambda: world.replica.journal.current_sequence == 90, what="every change applied")
    assert len(world.replica.journal) == 5


async def test_the_pin_lasts_at_most_catch_up_timeout(make_world: MakeWorld) -> None:
    """Within max_size, a client that stops reading during its snapshot still holds the journal only so long."""
    world = started(make_world, rows=50, journal_max_entries=5, buffer_max_size=1000, buffer_policy=SLOW,
                    buffer_catch_up_timeout=0.2)
    await eventually(lambda: world.replica.ready, what="the table ready")
    stuck, task = stuck_client(world, client_id="stuck")
    await eventually(lambda: len(world.replica.clients) == 1, what="the client connected")
    publish_changes(world, 100, 20)
    await eventually(lambda: world.replica.journal.current_sequence == 70, what="20 changes applied")
    await eventually(lambda: task.done() or len(world.replica.journal) == 5,
                     what="the journal pruned to max_entries once catch_up_timeout passed")
    stuck.resume_reading()
    with pytest.raises(ClientFellBehind, match="client stuck fell behind"):
        await asyncio.wait_for(task, 5)


async def test_go_away_reaches_a_client_in_its_snapshot(make_world: MakeWorld) -> None:
    world = started(make_world, rows=50)
    await eventually(lambda: world.replica.ready, what="the table ready")
    client, task = stuck_client(world, client_id="moving")
    await eventually(lambda: len(world.replica.clients) == 1, what="the client connected")
    world.targets.drain("", "", "rolling restart", 0.0)
    await eventually(lambda: world.replica.clients.clients()[0].state is ClientState.DRAINING,
                     what="the client told to leave")
    client.resume_reading()
    await eventually(lambda: client.replica.go_away is not None and client.replica.snapshot_done,
                     what="GoAway and the rest of the snapshot")
    kinds = [m.WhichOneof("message") for m in client.replica.messages]
    assert kinds.index("go_away") < kinds.index("snapshot_end")  # not held back until the client is live
    assert client.replica.go_away.reason == "rolling restart" and not task.done()  # type: ignore[union-attr]


async def test_a_filtered_client_is_not_behind_for_entries_its_filter_skips(make_world: MakeWorld) -> None:
    world = started(make_world, rows=3, buffer_max_size=5)
    keep = (FieldPredicate("name", MatchKind.EQUALS, "keep"),)
    client, task = world.sync_client(client_id="filtered", filters=keep, max_batch_size=10)
    await eventually(lambda: [c.state for c in world.replica.clients.clients()] == [ClientState.LIVE],
                     what="the client live")
    client.stop_reading()
    world.publish(world.batches.transaction(insert(row(10, "keep"))))  # its one wanted entry: the write hangs
    await eventually(lambda: world.replica.journal.current_sequence == 4, what="the wanted entry applied")
    publish_changes(world, 100, 40)  # none of which it wants
    await eventually(lambda: world.replica.journal.current_sequence == 44, what="40 unwanted changes applied")
    # its producer looks again within a tenth of a second: the skipped entries are behind it then
    await eventually(lambda: world.replica.clients.clients()[0].lag(44) <= 1,
                     what="the unwanted entries behind the client")
    assert not task.done()
    client.resume_reading()
    world.publish(world.batches.transaction(insert(row(11, "keep"))))
    await eventually(lambda: sorted(client.replica.rows) == [10, 11], what="both wanted rows")
    assert not task.done()
