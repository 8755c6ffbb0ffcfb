"""Replicator: baseline generations, idempotent replays, one journal entry per effective change."""

from __future__ import annotations

import logging

import pytest
from google.protobuf.json_format import MessageToDict

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.changes import TableId
from laredo_kernel.position import Position
from laredo_core.stream.codec import decode_batch
from laredo_kernel.tuples import UNCHANGED
from laredo_fanout.ports import FeedMessage
from services.fanout.tests.conftest import World, build_world
from services.fanout.tests.fanout_testkit import TABLE, Batches, delete, insert, row, truncate, update


def feed(world: World, *messages: bytes | list[bytes], table: TableId = TABLE) -> None:
    for message in messages:
        for data in message if isinstance(message, list) else [message]:
            world.replicator.on_batch(FeedMessage(table, decode_batch(data), 1, {}))


def journal_actions(world: World) -> list[tuple[int, str]]:
    read = world.replica.read_entry
    return [(e.sequence, read(e).action.value) for e in world.replica.journal.entries_after(0, 10_000)]


def wire_entry(data: bytes) -> rpb.ReplicationJournalEntry:
    message = rpb.SyncResponse.FromString(data)
    assert message.WhichOneof("message") == "journal_entry"
    return message.journal_entry


def test_baseline_rows_are_journaled_as_inserts_and_the_table_becomes_ready() -> None:
    world, batches = build_world(), Batches()
    feed(world, batches.baseline([row(i) for i in range(1, 6)], chunk_rows=2))
    assert len(world.replica.state) == 5
    assert journal_actions(world) == [(i, "INSERT") for i in range(1, 6)]
    assert world.replica.baseline_complete and not world.replica.ready  # not caught up yet
    world.replicator.on_caught_up(TABLE)
    assert world.replica.ready


def test_replayed_messages_change_nothing_and_are_reported_loudly(caplog: pytest.LogCaptureFixture) -> None:
    world, batches = build_world(), Batches()
    baseline = batches.baseline([row(1), row(2)])
    tx = batches.transaction(update(row(1, "x")), delete({"id": 2}))
    feed(world, baseline, tx)
    state = world.replica.state
    before = (journal_actions(world), {r.key: dict(state.values_of(r)) for r in state.rows()})
    assert world.replica.position_regressions == 0 and not caplog.records
    feed(world, baseline, tx)  # the stream delivers earlier positions again
    assert (journal_actions(world), {r.key: dict(state.values_of(r)) for r in state.rows()}) == before
    assert journal_actions(world) == [(1, "INSERT"), (2, "INSERT"), (3, "UPDATE"), (4, "DELETE")]
    assert world.replica.position_regressions == 2  # the baseline rows' message and the transaction's
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("at or before the position already applied" in w for w in warnings)
    assert "2 change(s) skipped" in warnings[1]
    _, details = world.targets.readiness()
    assert details["tables"][str(TABLE)]["position_regressions"] == 2


def test_rebaseline_deletes_rows_it_no_longer_contains_after_its_rows() -> None:
    world, batches = build_world(), Batches()
    feed(world, batches.baseline([row(1), row(2), row(3)]))
    feed(world, batches.baseline([row(2), row(3, "changed"), row(4)]))
    assert sorted(r.key for r in world.replica.state.rows()) == [2, 3, 4]
    assert journal_actions(world)[3:] == [(4, "INSERT"), (5, "INSERT"), (6, "DELETE")]  # row 2 unchanged
    entries = world.replica.journal.entries_after(0, 100)
    assert [e.position for e in entries] == sorted(e.position for e in entries)
    delete_entry = wire_entry(entries[-1].encoded)
    assert MessageToDict(delete_entry.old_values) == {"id": 1.0, "name": "n1", "doc": "d"}
    assert Position.parse(delete_entry.source_position) == entries[-1].position


def test_update_entry_carries_the_previous_full_row_and_the_merged_new_row() -> None:
    world, batches = build_world(), Batches()
    feed(world, batches.baseline([row(1, doc="big document")]))
    feed(world, batches.transaction(update({"id": 1, "name": "renamed", "doc": UNCHANGED}),
                                    commit_time_unix_us=1_700_000_123_456_789))
    entry = world.replica.journal.entries_after(1, 1)[0]
    wire = wire_entry(entry.encoded)
    assert (wire.sequence, wire.action, wire.xid) == (2, "UPDATE", batches.xid)
    assert MessageToDict(wire.old_values) == {"id": 1.0, "name": "n1", "doc": "big document"}
    assert MessageToDict(wire.new_values) == {"id": 1.0, "name": "renamed", "doc": "big document"}
    assert wire.timestamp.seconds == 1_700_000_123 and wire.timestamp.nanos == 456_789_000
    assert Position.parse(wire.source_position) == entry.position


def test_truncate_is_journaled_and_clears_the_rows() -> None:
    world, batches = build_world(), Batches()
    feed(world, batches.baseline([row(1), row(2)]), batches.transaction(truncate(), insert(row(9))))
    assert journal_actions(world)[2:] == [(3, "TRUNCATE"), (4, "INSERT")]
    assert [r.key for r in world.replica.state.rows()] == [9]


def test_message_for_another_table_on_this_subject_is_skipped() -> None:
    world = build_world()
    other = Batches(table=TableId("public", "other"))
    feed(world, other.baseline([row(1)]))
    assert len(world.replica.state) == 0 and len(world.replica.journal) == 0


async def test_appends_wake_waiting_sessions_once_per_message() -> None:
    world, batches = build_world(), Batches()
    event = world.replica.appended()
    feed(world, batches.baseline([row(1)]))
    assert event.done() and not world.replica.appended().done()
