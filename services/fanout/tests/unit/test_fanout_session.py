"""Sync sessions over the in-memory feed: snapshot + journal = complete state, live, heartbeats, batching."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_fanout.adapters.memory import MemoryChangeFeed
from laredo_fanout.application.client_registry import ClientState
from laredo_fanout.application.session import SyncRequestInfo
from laredo_fanout.domain.client_buffer import BufferPolicy
from laredo_fanout.domain.errors import ClientFellBehind, TooManyClients
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import TABLE, as_client_rows, delete, insert, row, update

MakeWorld = Callable[..., World]


def started(make_world: MakeWorld, rows: int = 3, **options: object) -> World:
    world = make_world(**options)
    world.publish(world.batches.baseline([row(i) for i in range(1, rows + 1)]))
    world.start()
    return world


def server_rows(world: World) -> dict[object, dict[str, object]]:
    return as_client_rows([dict(world.replica.state.values_of(r)) for r in world.replica.state.rows()])


async def test_full_snapshot_then_live_entries_with_contiguous_sequences(make_world: MakeWorld) -> None:
    world = started(make_world, rows=3)
    client, _ = world.sync()
    await eventually(lambda: client.snapshot_done, what="the snapshot to be sent")
    handshake = client.handshake
    assert handshake is not None and handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT
    assert handshake.resume_from_sequence == 3 and [c.column_name for c in handshake.columns] == ["id", "name", "doc"]
    begin = next(m.snapshot_begin for m in client.messages if m.WhichOneof("message") == "snapshot_begin")
    assert (begin.sequence, begin.row_count) == (3, 3) and begin.snapshot_id.startswith("fanout-3-")
    assert begin.source_position  # resume-by-position right after a snapshot (extension field)

    world.publish(world.batches.transaction(insert(row(4)), update(row(1, "one"))))
    world.publish(world.batches.transaction(delete({"id": 2})))
    await eventually(lambda: client.sequences == [4, 5, 6], what="live entries 4..6")
    assert client.rows == server_rows(world)
    status = world.targets.status("public", "items")
    assert [(c.state.value, c.sequence, c.lag(status.current_sequence)) for c in status.clients] == [("live", 6, 0)]


async def test_client_joining_mid_stream_sees_snapshot_plus_tail_without_gap_or_duplicate(
        make_world: MakeWorld) -> None:
    world = make_world(feed=MemoryChangeFeed(delivery_delay=0.002))  # changes keep flowing for a while
    world.publish(world.batches.baseline([row(i) for i in range(1, 21)]))
    world.start()
    first, _ = world.sync()
    await eventually(lambda: first.snapshot_done, what="the first client's snapshot")
    for i in range(21, 41):
        world.publish(world.batches.transaction(insert(row(i)), update(row(i - 20, f"u{i}")), delete({"id": i - 5})))
    journal = world.replica.journal
    await eventually(lambda: journal.current_sequence >= 40, what="half of the changes applied")
    second, _ = world.sync(client_id="second")
    await eventually(lambda: len(world.observer.applied) == 3 + 20, what="every message applied")
    for client in (first, second):
        await eventually(lambda c=client: c.sequences and c.sequences[-1] == journal.current_sequence,
                         what="the last entry")
        assert client.rows == server_rows(world)
    assert second.handshake is not None and second.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT
    assert second.snapshot_rows > 0 and second.sequences, "the second client should join mid-stream"
    assert second.sequences[0] == second.handshake.resume_from_sequence + 1


async def test_client_waits_until_the_table_is_ready(make_world: MakeWorld) -> None:
    world = make_world()
    world.start()
    client, task = world.sync()
    await asyncio.sleep(0)
    assert client.handshake is None and not task.done()
    world.publish(world.batches.baseline([row(1)]))
    await eventually(lambda: client.snapshot_done, what="the snapshot once the baseline completed")
    assert client.rows == server_rows(world)


async def test_heartbeats_when_idle(make_world: MakeWorld) -> None:
    world = started(make_world, heartbeat_interval=0.05)
    client, _ = world.sync()
    await eventually(lambda: client.heartbeats >= 2, what="two heartbeats", timeout=5)
    beat = next(m.heartbeat for m in client.messages if m.WhichOneof("message") == "heartbeat")
    assert beat.current_sequence == 3 and beat.server_time.seconds > 0


async def test_batching_extension_packs_rows_and_entries(make_world: MakeWorld) -> None:
    world = started(make_world, rows=25)
    client, _ = world.sync(max_batch_size=10)
    await eventually(lambda: client.snapshot_done, what="the snapshot")
    row_messages = [m for m in client.messages if m.WhichOneof("message") in ("snapshot_rows", "snapshot_row")]
    assert [len(m.snapshot_rows.rows) for m in row_messages] == [10, 10, 5]
    world.publish(world.batches.transaction(*(insert(row(i)) for i in range(100, 112))))
    await eventually(lambda: len(client.sequences) == 12, what="12 live entries")
    batches = [m for m in client.messages if m.WhichOneof("message") == "journal_batch"]
    assert batches and all(len(m.journal_batch.entries) <= 10 for m in batches)
    assert client.rows == server_rows(world)


async def test_catching_up_clients_read_chunks_that_end_on_batch_multiples_and_share_their_messages(
        make_world: MakeWorld) -> None:
    world = started(make_world, rows=3)
    await eventually(lambda: world.replica.ready, what="the table ready")
    world.publish(world.batches.transaction(*(insert(row(i)) for i in range(100, 130))))  # sequences 4-33
    await eventually(lambda: world.replica.journal.current_sequence == 33, what="30 entries appended")
    batches: list[list[bytes]] = []
    for _ in range(2):
        sent: list[bytes] = []
        batches.append(sent)

        async def write(data: bytes, sent: list[bytes] = sent) -> None:
            if rpb.SyncResponse.FromString(data).WhichOneof("message") == "journal_batch":
                sent.append(data)

        session = world.targets.open_session(SyncRequestInfo(
            schema=TABLE.schema, table=TABLE.name, max_batch_size=10, last_known_sequence=5, **world.issued_here()))
        world.tasks.append(asyncio.create_task(session.serve(write)))
        await eventually(lambda sent=sent: len(sent) == 4, what="the backlog in four messages")
        assert [[e.sequence for e in rpb.SyncResponse.FromString(data).journal_batch.entries] for data in sent] == [
            list(range(6, 11)), list(range(11, 21)), list(range(21, 31)), [31, 32, 33]]
    assert all(a is b for a, b in zip(*batches))  # the same bytes objects: built once for both clients


async def test_unbatched_client_never_sees_batch_messages(make_world: MakeWorld) -> None:
    world = started(make_world, rows=5)
    client, _ = world.sync()
    await eventually(lambda: client.snapshot_done, what="the snapshot")
    world.publish(world.batches.transaction(*(insert(row(i)) for i in range(10, 15))))
    await eventually(lambda: len(client.sequences) == 5, what="5 live entries")
    assert client.batched_messages == 0


async def test_delta_by_sequence_and_by_source_position(make_world: MakeWorld) -> None:
    world = started(make_world, rows=3)
    world.publish(world.batches.transaction(insert(row(4))), world.batches.transaction(insert(row(5))))
    await eventually(lambda: world.replica.journal.current_sequence == 5, what="5 entries")
    by_sequence, _ = world.sync(last_known_sequence=3, **world.issued_here())
    entry_4 = world.replica.journal.entries_after(3, 1)[0]
    by_position, _ = world.sync(last_known_source_position=str(entry_4.position))
    await eventually(lambda: by_sequence.sequences == [4, 5], what="entries after 3")
    await eventually(lambda: by_position.sequences == [5], what="entries after position of 4")
    for client, resume in ((by_sequence, 3), (by_position, 4)):
        assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA
        assert client.handshake.resume_from_sequence == resume and client.snapshot_rows == 0


async def test_max_clients_is_enforced(make_world: MakeWorld) -> None:
    world = started(make_world, max_clients=1)
    first, _ = world.sync()
    await eventually(lambda: first.snapshot_done, what="the first client's snapshot")
    _, rejected = world.sync()
    with pytest.raises(TooManyClients):
        await rejected


async def test_live_client_overtaken_by_pruning_is_ended(make_world: MakeWorld) -> None:
    """slow_down: a client that stops reading is fed at its pace; once pruning passes it, it is ended."""
    world = started(make_world, journal_max_entries=5, buffer_max_size=2, buffer_policy=BufferPolicy.SLOW_DOWN)
    registry = world.replica.clients
    client, task = world.sync_client(client_id="slow", max_batch_size=2)  # 2 messages ahead, the rest waits
    await eventually(lambda: [c.state for c in registry.clients()] == [ClientState.LIVE], what="the client live")
    world.publish(world.batches.transaction(insert(row(50))))
    await eventually(lambda: client.replica.sequences == [4], what="the first live entry")
    client.stop_reading()
    for i in range(60, 64):
        world.publish(world.batches.transaction(insert(row(i))))
    await eventually(lambda: [c.state for c in registry.clients()] == [ClientState.BACKPRESSURED],
                     what="the client's buffer full")
    for i in range(64, 70):  # the journal (5 entries) prunes past what the client still needs
        world.publish(world.batches.transaction(insert(row(i))))
    await eventually(lambda: world.replica.journal.oldest_sequence > 8, what="pruning past the client")
    client.resume_reading()
    with pytest.raises(ClientFellBehind, match="client slow fell behind"):
        await task
    assert len(registry) == 0


async def test_the_journal_stays_pinned_while_a_slow_client_receives_its_snapshot(make_world: MakeWorld) -> None:
    world = started(make_world, rows=50, journal_max_entries=5, feed=MemoryChangeFeed(delivery_delay=0.001))
    await eventually(lambda: world.replica.ready, what="the table ready")
    client, task = world.sync_client(client_id="slow", max_batch_size=10)
    client.stop_reading()  # it took nothing yet: the snapshot waits in its buffer, the journal is pinned at 50
    for i in range(100, 130):
        world.publish(world.batches.transaction(insert(row(i))))
    await eventually(lambda: world.replica.journal.current_sequence == 80, what="30 changes applied")
    assert world.replica.journal.first_retained_sequence == 51  # not pruned to 5 entries: pinned
    client.resume_reading()
    await eventually(lambda: client.replica.sequences[-1:] == [80], what="every entry after the snapshot")
    assert client.replica.rows == server_rows(world) and client.replica.sequences == list(range(51, 81))
    world.publish(world.batches.transaction(insert(row(200))))  # the next append prunes: nothing pins any more
    await eventually(lambda: world.replica.journal.first_retained_sequence == 77, what="pruning once live")
    assert not task.done()
