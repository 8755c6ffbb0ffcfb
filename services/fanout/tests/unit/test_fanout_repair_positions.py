"""Repairs (RestoreSnapshot, StartReplay, dead-letter replays) take positions after the applied stream change, so
a client resuming by position after that change receives them, and one that applied them does not again."""

from __future__ import annotations

from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_core.coordination.ports import CommandStatus
from laredo_kernel.position import Position
from laredo_fanout.domain.journal import Journal, JournalEntry
from services.fanout.tests.fanout_testkit import row, update
from services.fanout.tests.unit.test_fanout_rebuild import MakeWorld, corrupt, loaded


def entry(journal: Journal, position: Position) -> JournalEntry:
    return JournalEntry(journal.next_sequence, position, b"", 0.0)


def test_the_journal_resumes_a_client_at_the_applied_change_before_its_repairs() -> None:
    journal = Journal(100, 0.0)
    change = Position(0x100, 2)
    positions = [Position(0x100, 1), change, change.next_repair(), change.next_repair().next_repair(),
                 Position(0x200, 0)]
    for position in positions:
        journal.append(entry(journal, position), 0.0)
    assert journal.resume_after_position(change) == 2, "a client at the applied change gets both repairs"
    assert journal.resume_after_position(change.next_repair()) == 3
    assert journal.resume_after_position(change.next_repair().next_repair()) == 4
    assert journal.resume_after_position(Position.parse(f"{change}+2")) == 4, "as the client sends it"


def test_a_journal_continued_after_a_snapshot_with_repairs_covers_only_clients_that_hold_them() -> None:
    journal = Journal(100, 0.0)
    change = Position(0x100, 2)
    journal.continue_after(7, change.next_repair())
    assert journal.resume_after_position(change.next_repair()) == 7
    assert journal.resume_after_position(change) is None, "a client without the repairs needs a snapshot"


async def test_a_client_resuming_after_a_restore_by_position_receives_the_repairs(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    world = rig.world
    manifest = await rig.snapshots.take()
    assert manifest is not None
    world.publish(world.batches.transaction(update(row(2, "two"))))
    await eventually(lambda: world.replica.journal.current_sequence == 6, what="the change after the snapshot")
    expected, applied = rig.rows(), world.replica.applied_position
    assert applied is not None
    corrupt(rig)  # what the restore repairs: three rows the clients were sent but the stream never changed

    result = await rig.restore(manifest.snapshot_id)
    assert result.status is CommandStatus.SUCCEEDED, result.message
    assert (await rig.ended("restore-1"))["state"] == "completed"
    assert rig.rows() == expected
    repairs = world.replica.journal.entries_after(6, 100)
    assert [e.position for e in repairs] == [Position(applied.lsn, applied.ordinal, repair=k) for k in (1, 2, 3)]
    assert world.replica.applied_position == repairs[-1].position, "snapshots and full syncs include them"

    away, _ = world.sync(last_known_source_position=str(applied))
    await eventually(lambda: len(away.sequences) == 3, what="the three repairs, to a client resuming by position")
    assert away.handshake is not None and away.handshake.mode == rpb.SYNC_MODE_DELTA
    assert away.sequences == [7, 8, 9]
    sent = [m.journal_entry.source_position for m in away.messages if m.WhichOneof("message") == "journal_entry"]
    assert sent == [str(e.position) for e in repairs]

    world.publish(world.batches.transaction(update(row(3, "three"))))
    current, _ = world.sync(last_known_source_position=str(repairs[-1].position))
    await eventually(lambda: current.sequences, what="the next stream change")
    assert current.handshake is not None and current.handshake.mode == rpb.SYNC_MODE_DELTA
    assert current.sequences == [10], "the repairs it applied are not sent again"
