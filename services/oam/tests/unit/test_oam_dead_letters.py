"""Dead-letter use cases over the in-memory stores: validation, listing, purging, and replays merged across the
instances of a target (a letter succeeds only where every instance applied it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from laredo_core.coordination.ports import Command, CommandResult, CommandStatus
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.deadletters.model import DeadLetter, DeadLetterStoreUnavailable, PipelineId
from laredo_core.deadletters.replay import ReplayOutcome, ReplayReport, parse_replay_args

from laredo_oam.adapters.memory import InMemoryCoordinationStore
from laredo_oam.application.dead_letters import MAX_LIST, DeadLetters, ReplayTotals
from laredo_oam.domain.errors import CommandTimedOut, InvalidRequest, NotFound, PreconditionFailed
from laredo_oam.domain.catalog import PipelineKey
from services.oam.tests.oam_testkit import beat, catalog, fanout_report

PIPELINE_ID = "pg:public.users:replication-fanout"
PIPELINE = PipelineId.parse(PIPELINE_ID)
Outcomes = Callable[[DeadLetter], tuple[ReplayOutcome, str]]


@pytest.fixture
def coordination() -> InMemoryCoordinationStore:
    return InMemoryCoordinationStore(block=0.05)


@pytest.fixture
def letters() -> InMemoryDeadLetterStore:
    return InMemoryDeadLetterStore()


@pytest.fixture
def use_cases(coordination: InMemoryCoordinationStore, letters: InMemoryDeadLetterStore) -> DeadLetters:
    return DeadLetters(catalog(), letters, coordination, command_timeout=2.0)


async def fill(store: InMemoryDeadLetterStore, count: int, pipeline: PipelineId = PIPELINE) -> None:
    for n in range(1, count + 1):
        await store.write(DeadLetter(pipeline, f"s{n}-m", f"failure {n}", b"\xff", stream_sequence=n))


@contextlib.asynccontextmanager
async def instance(store: InMemoryCoordinationStore, instance_id: str, outcome: Outcomes) -> AsyncIterator[None]:
    """A fan-out instance serving public.users that answers replays with `outcome` per letter."""
    await beat(store, "fanout", instance_id, fanout_report({"public.users": {}}))
    subscription = store.commands(f"fanout:{instance_id}", instance_id)

    async def serve() -> None:
        async for command in subscription:
            await store.complete_command(command, answer(command, instance_id, outcome))

    task = asyncio.create_task(serve())
    try:
        yield
    finally:
        await subscription.aclose()
        await asyncio.wait_for(task, 5)


def answer(command: Command, instance_id: str, outcome: Outcomes) -> CommandResult:
    _, page = parse_replay_args(command.args)
    results = {letter.letter_id: outcome(letter) for letter in page}
    report = ReplayReport({i: o for i, (o, _) in results.items()},
                          {i: why for i, (o, why) in results.items() if o is ReplayOutcome.FAILED})
    return CommandResult(command.command_id, CommandStatus.SUCCEEDED, "", report.to_details(), executed_by=instance_id)


def applies(letter: DeadLetter) -> tuple[ReplayOutcome, str]:
    return ReplayOutcome.APPLIED, ""


async def test_requests_are_checked_before_the_store_is_used(coordination: InMemoryCoordinationStore) -> None:
    use_cases = DeadLetters(catalog(), None, coordination)
    with pytest.raises(InvalidRequest, match="pipeline_id is required"):
        await use_cases.list("")
    with pytest.raises(InvalidRequest, match="malformed"):
        await use_cases.purge("users")
    with pytest.raises(NotFound, match="pipeline 'pg:public.nope:replication-fanout' does not exist"):
        await use_cases.replay("pg:public.nope:replication-fanout")
    with pytest.raises(PreconditionFailed, match="dead_letters.enabled = false"):
        await use_cases.list(PIPELINE_ID)


async def test_list_is_oldest_first_with_a_limit_and_the_total_and_purge_counts(
        use_cases: DeadLetters, letters: InMemoryDeadLetterStore) -> None:
    await fill(letters, 5)
    await fill(letters, 2, PipelineId.parse("pg:public.orders:replication-fanout"))
    page = await use_cases.list(PIPELINE_ID, 2)
    assert [x.letter_id for x in page.letters] == ["s1-m", "s2-m"] and page.total == 5
    assert len((await use_cases.list(PIPELINE_ID)).letters) == 5
    with pytest.raises(InvalidRequest, match="limit must be 0"):
        await use_cases.list(PIPELINE_ID, -1)
    assert await use_cases.purge(PIPELINE_ID) == 5 and await use_cases.purge(PIPELINE_ID) == 0
    assert await letters.count(PipelineId.parse("pg:public.orders:replication-fanout")) == 2
    assert MAX_LIST >= 100


async def test_a_letter_succeeds_only_where_every_instance_applied_it(
        use_cases: DeadLetters, letters: InMemoryDeadLetterStore, coordination: InMemoryCoordinationStore) -> None:
    await fill(letters, 3)

    def second_fails_one(letter: DeadLetter) -> tuple[ReplayOutcome, str]:
        if letter.letter_id == "s2-m":
            return ReplayOutcome.FAILED, "still broken on f2"
        return ReplayOutcome.SUPERSEDED, ""

    async with instance(coordination, "f1", applies), instance(coordination, "f2", second_fails_one):
        totals = await use_cases.replay(PIPELINE_ID)
    assert totals == ReplayTotals(replayed=3, succeeded=2, failed=1)
    (left,) = (await letters.list(PIPELINE)).letters
    assert (left.letter_id, left.error, left.replays) == ("s2-m", "still broken on f2", 1)


async def test_a_replay_pages_through_many_letters_and_never_rereads_rewritten_ones(
        use_cases: DeadLetters, letters: InMemoryDeadLetterStore, coordination: InMemoryCoordinationStore) -> None:
    await fill(letters, 1200)
    seen: list[str] = []

    def every_third_fails(letter: DeadLetter) -> tuple[ReplayOutcome, str]:
        seen.append(letter.letter_id)
        n = int(letter.letter_id[1:-2])
        return (ReplayOutcome.FAILED, "no") if n % 3 == 0 else (ReplayOutcome.APPLIED, "")

    async with instance(coordination, "f1", every_third_fails):
        totals = await use_cases.replay(PIPELINE_ID)
    assert totals == ReplayTotals(1200, 800, 400) and len(seen) == 1200 == len(set(seen))
    assert await letters.count(PIPELINE) == 400


async def test_a_replay_needs_a_running_instance_and_its_answer(
        use_cases: DeadLetters, letters: InMemoryDeadLetterStore, coordination: InMemoryCoordinationStore) -> None:
    assert await use_cases.replay(PIPELINE_ID) == ReplayTotals(), "nothing to replay needs no instance"
    await fill(letters, 1)
    with pytest.raises(PreconditionFailed, match="no running fanout instance serves public.users"):
        await use_cases.replay(PIPELINE_ID)
    await beat(coordination, "fanout", "silent", fanout_report({"public.users": {}}))
    use_cases.command_timeout = 0.2
    with pytest.raises(CommandTimedOut, match="no answer from fanout:silent"):
        await use_cases.replay(PIPELINE_ID)
    assert await letters.count(PIPELINE) == 1, "unanswered: the letters stay"


async def test_an_unreachable_store_is_reported_as_such(coordination: InMemoryCoordinationStore) -> None:
    use_cases = DeadLetters(catalog(), InMemoryDeadLetterStore(available=False), coordination)
    with pytest.raises(DeadLetterStoreUnavailable):
        await use_cases.list(PIPELINE_ID)
    assert PipelineKey.parse(PIPELINE_ID).pipeline_id == PIPELINE_ID
