"""Dead letters in query: a change that breaks a unique index (or lacks its key) is kept with its reason and the
next one is applied; a replay applies it once the data allows, never over a later change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from laredo_testing.eventually import eventually

from laredo_core.coordination.ports import CommandStatus
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.recorder import DeadLetterRecorder
from laredo_core.deadletters.replay import ReplayOutcome, replay_args
from laredo_core.deadletters.writer import DeadLetterWriter
from laredo_core.stream.codec import decode_batch
from laredo_query.application.dead_letter_replay import QueryDeadLetterReplay
from services.query.tests.query_testkit import TABLE, row
from services.query.tests.unit.conftest import World

PIPELINE = PipelineId("pg", TABLE, "indexed-memory")


def with_dead_letters(world: World) -> InMemoryDeadLetterStore:
    store = InMemoryDeadLetterStore()
    writer = DeadLetterWriter(store)
    world.applier.dead_letters = DeadLetterRecorder(writer, "indexed-memory", "query:test")
    world.tasks.append(asyncio.create_task(writer.run()))
    return store


async def stored(store: InMemoryDeadLetterStore, count: int) -> tuple[DeadLetter, ...] | None:
    page = await store.list(PIPELINE)
    return page.letters if page.total >= count else None


def replay_of(world: World) -> QueryDeadLetterReplay:
    return QueryDeadLetterReplay({TABLE: world.table}, world.clock, partial(decode_batch, json_values=True))


def emails(world: World) -> dict[int, str]:
    return {r.key: r.values["email"] for r in world.table.indexed.rows()}


async def test_a_unique_index_violation_is_kept_and_replayed_once_the_other_row_moved(
        make_world: Callable[..., World]) -> None:
    world = make_world()
    store = with_dead_letters(world)
    b = world.batches
    world.publish(b.baseline([row(1, email="x@example.com")]), b.transaction(b.insert(row(2, email="x@example.com"))),
                  b.transaction(b.insert(row(3))))
    world.start()
    await eventually(lambda: 3 in emails(world), what="the change after the rejected one")
    (letter,) = await eventually(lambda: stored(store, 1), what="the dead letter")
    assert "lookup_fields (email) already holds email='x@example.com' for the row with primary key id=1" in letter.error
    assert letter.new_values == {**row(2, email="x@example.com")} and letter.letter_id == "s4-c0"
    assert world.table.dead_letters == 1 and world.table.status()["dead_letters"] == 1
    replay = replay_of(world)
    status, _, details = replay.execute(replay_args(PIPELINE, [letter]))
    assert status is CommandStatus.SUCCEEDED and "already holds" in details["failed"]["s4-c0"]

    world.publish(b.transaction(b.update(row(1, email="y@example.com"))))  # the data is fixed at the source
    await eventually(lambda: emails(world).get(1) == "y@example.com", what="the fix")
    assert replay.replay(world.table, PIPELINE, [letter]).outcomes == {"s4-c0": ReplayOutcome.APPLIED}
    assert emails(world) == {1: "y@example.com", 2: "x@example.com", 3: "u3@example.com"}
    assert [r.key for r in world.table.indexed.lookup("lookup", ["x@example.com"])] == [2]


async def test_a_replay_never_brings_back_a_row_changed_or_deleted_after_the_rejected_change(
        make_world: Callable[..., World]) -> None:
    world = make_world()
    store = with_dead_letters(world)
    b = world.batches
    world.publish(b.baseline([row(1, email="x@example.com"), row(2)]),
                  b.transaction(b.update(row(2, email="x@example.com"))),  # rejected: row 1 holds x
                  b.transaction(b.update(row(2, email="later@example.com"))),
                  b.transaction(b.insert(row(4, email="x@example.com")), b.delete({"id": 1})),  # 4 rejected
                  b.transaction(b.delete({"id": 4})))  # ...and deleted after (the delete finds nothing)
    world.start()
    letters = await eventually(lambda: stored(store, 2), what="both dead letters")
    await eventually(lambda: 1 not in emails(world), what="the last change")
    report = replay_of(world).replay(world.table, PIPELINE, letters)
    assert report.outcomes == {letters[0].letter_id: ReplayOutcome.SUPERSEDED,
                               letters[1].letter_id: ReplayOutcome.SUPERSEDED}
    assert emails(world) == {2: "later@example.com"}
