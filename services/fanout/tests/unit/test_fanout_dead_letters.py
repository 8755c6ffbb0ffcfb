"""Dead letters in fan-out: what cannot be applied is kept with its reason, applying goes on; replays re-apply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial

import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import Command, CommandKind, CommandStatus
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.recorder import DeadLetterRecorder
from laredo_core.deadletters.replay import ReplayOutcome, replay_args
from laredo_core.deadletters.writer import DeadLetterWriter
from laredo_core.stream.codec import decode_batch
from laredo_kernel.tuples import UNCHANGED
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.application.coordination import FanoutCoordinator
from laredo_fanout.application.dead_letter_replay import FanoutDeadLetterReplay
from laredo_fanout.ports import FeedMessage
from services.fanout.tests.conftest import World, build_world
from services.fanout.tests.fanout_testkit import TABLE, Batches, insert, row

PIPELINE = PipelineId("pg", TABLE, "replication-fanout")


@pytest.fixture
async def world() -> AsyncIterator[tuple[World, InMemoryDeadLetterStore]]:
    store = InMemoryDeadLetterStore()
    writer = DeadLetterWriter(store)
    built = build_world()
    built.replicator.dead_letters = DeadLetterRecorder(writer, "replication-fanout", "fanout:test")
    built.tasks.append(asyncio.create_task(writer.run()))
    yield built, store
    for task in built.tasks:
        task.cancel()
    await asyncio.gather(*built.tasks, return_exceptions=True)


async def letters(store: InMemoryDeadLetterStore, count: int) -> tuple[DeadLetter, ...] | None:
    page = await store.list(PIPELINE)
    return page.letters if page.total >= count else None


def rows(world: World) -> dict[object, dict[str, object]]:
    return {r.key: dict(world.replica.state.values_of(r)) for r in world.replica.state.rows()}


async def test_a_change_without_its_key_becomes_a_dead_letter_and_the_next_one_is_applied(
        world: tuple[World, InMemoryDeadLetterStore]) -> None:
    w, store = world
    batches = Batches()
    w.publish(batches.baseline([row(1)]),
              batches.transaction(insert({"id": UNCHANGED, "name": "lost"}), insert(row(2))))
    w.start()
    await eventually(lambda: len(w.replica.state) == 2, what="the row after the bad change")
    (letter,) = await eventually(lambda: letters(store, 1), what="the dead letter")
    assert letter.letter_id == "s4-c0" and letter.stream_sequence == 4 and letter.recorded_by == "fanout:test"
    assert "lacks the value of key column 'id'" in letter.error and letter.action == "INSERT"
    assert w.replica.dead_letters == 1 and w.targets.readiness()[1]["tables"]["public.items"]["dead_letters"] == 1
    assert rows(w) == {1: row(1), 2: row(2)}
    applied = w.targets.readiness()[1]["tables"]["public.items"]["applied"]  # the dead letter is not counted
    assert (applied["inserts"], applied["updates"], applied["deletes"], applied["truncates"]) == (1, 0, 0, 0)


async def test_undecodable_bytes_and_a_message_of_another_table_are_kept_whole(
        world: tuple[World, InMemoryDeadLetterStore]) -> None:
    w, store = world
    w.publish(b"\xffnot a change batch", Batches(table=TableId("public", "other")).transaction(insert(row(9))),
              Batches().baseline([row(1)]))
    w.start()
    await eventually(lambda: w.replica.ready or w.replica.baseline_complete, what="the baseline after both")
    corrupt, stray = await eventually(lambda: letters(store, 2), what="two dead letters")
    assert (corrupt.letter_id, corrupt.decodable, corrupt.message) == ("s1-m", False, b"\xffnot a change batch")
    assert "corrupt change batch" in corrupt.error
    assert stray.letter_id == "s2-m" and "carries table public.other" in stray.error
    assert rows(w) == {1: row(1)}


def test_a_replay_applies_a_missing_row_once_and_reports_what_it_cannot_apply() -> None:
    w = build_world()
    batches = Batches()
    for data in batches.baseline([row(1)]):
        w.replicator.on_batch(_message(data))
    stale = DeadLetter(PIPELINE, "s2-c0", "old", batches.transaction(insert(row(1, "stale"))), 0)
    w.replicator.on_batch(_message(batches.transaction(insert(row(1, "newer")))))
    applied = w.replica.applied_position
    replay = replay_of(w)
    missing = DeadLetter(PIPELINE, "pkeyless-1", "no key", batches.transaction(insert(row(5))), 0)
    keyless = DeadLetter(PIPELINE, "s3-c0", "no key", batches.transaction(insert({"id": UNCHANGED})), 0)
    corrupt = DeadLetter(PIPELINE, "s4-m", "corrupt", b"\xff\x00")
    status, _, details = replay.execute(replay_args(PIPELINE, [missing, stale, keyless, corrupt]))
    assert status is CommandStatus.SUCCEEDED
    assert details["applied"] == ["pkeyless-1"] and details["superseded"] == ["s2-c0"]
    assert set(details["failed"]) == {"s3-c0", "s4-m"} and "still does not decode" in details["failed"]["s4-m"]
    assert rows(w) == {1: row(1, "newer"), 5: row(5)}, "a row written later is never rolled back"
    entry = w.replica.journal.entries_after(w.replica.journal.current_sequence - 1, 1)[0]
    message = rpb.SyncResponse.FromString(entry.encoded).journal_entry
    assert applied is not None and entry.position == applied.next_repair() == w.replica.applied_position
    assert (message.action, message.source_position) == ("INSERT", f"{applied}+1"), (
        "after the applied change, before any later one: a client resuming after the applied change gets it")
    again = replay.replay(w.replica, PIPELINE, [missing])
    assert again.outcomes == {"pkeyless-1": ReplayOutcome.SUPERSEDED}


def test_a_replay_for_a_table_this_instance_does_not_serve_is_rejected() -> None:
    w = build_world()
    replay = replay_of(w)
    other = PipelineId("pg", TableId("public", "other"), "replication-fanout")
    status, message, _ = replay.execute(replay_args(other, []))
    assert status is CommandStatus.REJECTED and "no target for pipeline pg:public.other" in message


async def test_the_coordinator_runs_replay_commands() -> None:
    w = build_world()
    replay = replay_of(w)
    coordinator = FanoutCoordinator(InMemoryCoordinationStore(), "f1", w.targets, w.clock, dead_letter_replay=replay)
    letter = DeadLetter(PIPELINE, "s1-c0", "x", Batches().transaction(insert(row(3))), 0)
    result = await coordinator.execute(Command("c1", "fanout:f1", CommandKind.REPLAY_DEAD_LETTERS,
                                               replay_args(PIPELINE, [letter])))
    assert result.status is CommandStatus.SUCCEEDED and result.details["applied"] == ["s1-c0"]
    broken = await coordinator.execute(Command("c2", "fanout:f1", CommandKind.REPLAY_DEAD_LETTERS, {"x": 1}))
    assert broken.status is CommandStatus.FAILED and "pipeline_id" in broken.message


def replay_of(w: World) -> FanoutDeadLetterReplay:
    return FanoutDeadLetterReplay({TABLE: w.replica}, ProtobufSyncEncoder(), w.clock,
                                  partial(decode_batch, json_values=True))


def _message(data: bytes) -> FeedMessage:
    return FeedMessage(TABLE, decode_batch(data, json_values=True), 1, {}, data)


async def test_an_unreachable_dead_letter_store_never_stalls_the_stream() -> None:
    store = InMemoryDeadLetterStore(available=False)
    writer = DeadLetterWriter(store, initial_backoff=0.01, max_backoff=0.02)
    w = build_world()
    w.replicator.dead_letters = DeadLetterRecorder(writer, "replication-fanout", "fanout:test")
    w.tasks.append(asyncio.create_task(writer.run()))
    batches = Batches()
    w.publish(batches.baseline([row(1)]), batches.transaction(insert({"id": UNCHANGED})),
              batches.transaction(insert(row(2))))
    w.start()
    try:
        await eventually(lambda: len(w.replica.state) == 2 and writer.stats.retries > 0,
                         what="applying went on while the store was away")
        assert writer.pending == 1 and store.writes == 0
        store.available = True
        await eventually(lambda: letters(store, 1), what="the letter once the store is back")
    finally:
        for task in w.tasks:
            task.cancel()
        await asyncio.gather(*w.tasks, return_exceptions=True)

