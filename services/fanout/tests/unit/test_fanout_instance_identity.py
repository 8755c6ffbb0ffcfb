"""Sequences are instance-local: a session honours last_known_sequence only from its own instance and journal
epoch, and names both in the handshake for clients that ask."""

from __future__ import annotations

from collections.abc import Callable

from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_fanout.domain.journal import Journal
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import insert, row

MakeWorld = Callable[..., World]


def started(make_world: MakeWorld, *, changes: int, **options: object) -> World:
    """Three baseline rows (sequences 1-3), then `changes` single-insert transactions."""
    world = make_world(**options)
    world.publish(world.batches.baseline([row(i) for i in range(1, 4)]))
    world.publish(*(world.batches.transaction(insert(row(10 + i))) for i in range(changes)))
    world.start()
    return world


async def ready(world: World, current: int) -> None:
    await eventually(lambda: world.replica.ready and world.replica.journal.current_sequence == current,
                     what=f"the journal at sequence {current}")


async def test_the_handshake_names_instance_and_epoch_only_when_asked(make_world: MakeWorld) -> None:
    world = started(make_world, changes=0)
    await ready(world, 3)
    asked, _ = world.sync(identify_instance=True)
    plain, _ = world.sync()
    await eventually(lambda: asked.snapshot_done and plain.snapshot_done, what="both snapshots")
    assert asked.handshake is not None and plain.handshake is not None
    assert (asked.handshake.instance_id, asked.handshake.journal_epoch) == ("fanout-test", world.replica.journal.epoch)
    assert all(field.number < 100 for field, _ in plain.handshake.ListFields()), "no extension unasked"
    assert (plain.handshake.instance_id, plain.handshake.journal_epoch) == ("", "")


async def test_a_sequence_from_this_journal_resumes_by_sequence(make_world: MakeWorld) -> None:
    world = started(make_world, changes=2)
    await ready(world, 5)
    client, _ = world.sync(last_known_sequence=3, **world.issued_here())
    await eventually(lambda: client.sequences == [4, 5], what="the entries after sequence 3")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA
    assert client.handshake.resume_from_sequence == 3 and client.snapshot_rows == 0
    assert client.handshake.instance_id == "fanout-test", "a client sending an identity gets one back"


async def test_a_sequence_from_another_instance_is_not_resumed_from(make_world: MakeWorld) -> None:
    """The client's sequence 3 was issued by fanout-b; here 3 is another change. No covered position: snapshot."""
    world = started(make_world, changes=2)
    await ready(world, 5)
    client, _ = world.sync(last_known_sequence=3, last_known_instance_id="fanout-b",
                           last_known_journal_epoch=world.replica.journal.epoch)
    await eventually(lambda: client.snapshot_done, what="a full snapshot instead of a foreign delta")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT
    assert client.handshake.resume_from_sequence == 5 and client.snapshot_rows == 5


async def test_a_foreign_sequence_falls_back_to_the_source_position(make_world: MakeWorld) -> None:
    world = started(make_world, changes=3)
    await ready(world, 6)
    position_of_4 = str(world.replica.journal.entries_after(3, 1)[0].position)
    client, _ = world.sync(last_known_sequence=5, last_known_instance_id="fanout-b", last_known_journal_epoch="e9",
                           last_known_source_position=position_of_4)
    await eventually(lambda: client.sequences == [5, 6], what="the entries after the position of 4, not after 5")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA
    assert client.handshake.resume_from_sequence == 4


async def test_a_sequence_without_an_identity_is_not_resumed_from(make_world: MakeWorld) -> None:
    """An upstream client sends a bare sequence; it may come from any instance behind the load balancer."""
    world = started(make_world, changes=2)
    await ready(world, 5)
    client, _ = world.sync(last_known_sequence=3)
    await eventually(lambda: client.snapshot_done, what="a full snapshot")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT


async def test_a_restarted_journal_has_a_new_epoch_and_old_sequences_are_refused(make_world: MakeWorld) -> None:
    """Same instance id (a configured one survives restarts), new journal: the old numbering means nothing."""
    world = started(make_world, changes=2)
    await ready(world, 5)
    before = world.issued_here()
    assert Journal(10, 0).epoch != Journal(10, 0).epoch != world.replica.journal.epoch
    world.replica.journal = Journal(1000, 0.0)  # what a restart does: a new journal, numbering from 1
    client, _ = world.sync(last_known_sequence=3, **before)
    await eventually(lambda: client.snapshot_done, what="a full snapshot after the epoch changed")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT
    assert client.handshake.journal_epoch == world.replica.journal.epoch != before["last_known_journal_epoch"]
