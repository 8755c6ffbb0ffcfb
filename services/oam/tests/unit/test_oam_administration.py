"""Administration over the in-memory store: commands reach the right targets and answers are mapped."""

from __future__ import annotations

import pytest
from laredo_core.coordination.ports import (
    Command,
    CommandKind,
    CommandResult,
    CommandStatus,
    CoordinationUnavailable,
)

from laredo_oam.adapters.memory import InMemoryCoordinationStore
from laredo_oam.application.administration import Administration, Outcome
from laredo_oam.domain.errors import CommandTimedOut, InvalidRequest, NotFound, PreconditionFailed
from services.oam.tests.oam_testkit import beat, catalog, executing, fanout_report, ingest_report


@pytest.fixture
def store() -> InMemoryCoordinationStore:
    return InMemoryCoordinationStore(block=0.05)


@pytest.fixture
def admin(store: InMemoryCoordinationStore) -> Administration:
    return Administration(store, catalog(), command_timeout=2.0)


async def test_reload_table_sends_schema_and_table_to_the_source(store: InMemoryCoordinationStore,
                                                                 admin: Administration) -> None:
    async with executing(store, "ingest:pg", "i1") as seen:
        outcome = await admin.reload_table("pg", "", "users")
    assert outcome.accepted and "ingest:pg: succeeded (reload done)" in outcome.message
    assert [(c.kind, dict(c.args)) for c in seen] == [(CommandKind.RELOAD, {"schema": "public", "table": "users"})]


async def test_reload_all_pause_resume_address_every_source_when_none_named(store: InMemoryCoordinationStore,
                                                                           admin: Administration) -> None:
    await beat(store, "ingest", "i2", ingest_report(source="other"))
    seen: list[Command] = []
    async with executing(store, "ingest:pg", "i1", seen=seen), executing(store, "ingest:other", "i2", seen=seen):
        assert (await admin.pause("")).accepted
        assert (await admin.resume("other")).accepted
        assert (await admin.reload_all("pg")).accepted
    assert sorted((c.target, c.kind.value) for c in seen) == [
        ("ingest:other", "pause"), ("ingest:other", "resume"), ("ingest:pg", "pause"), ("ingest:pg", "reload")]
    assert [dict(c.args) for c in seen if c.kind is CommandKind.RELOAD] == [{}]


async def test_a_rejected_command_is_not_accepted_and_says_why(store: InMemoryCoordinationStore,
                                                               admin: Administration) -> None:
    async with executing(store, "ingest:pg", "i1", lambda c: (CommandStatus.REJECTED, "already paused")):
        outcome = await admin.pause("pg")
    assert not outcome.accepted and "rejected (already paused)" in outcome.message


async def test_reset_needs_confirm_and_a_source(store: InMemoryCoordinationStore, admin: Administration) -> None:
    with pytest.raises(PreconditionFailed, match="confirm=true"):
        await admin.reset("pg", confirm=False, drop_publication=False)
    with pytest.raises(InvalidRequest, match="source_id is required"):
        await admin.reset("", confirm=True, drop_publication=False)
    async with executing(store, "ingest:pg", "i1") as seen:
        outcome = await admin.reset("pg", confirm=True, drop_publication=True)
    assert outcome.accepted and outcome.details == {"i1": {"kind": "reset"}}
    assert [dict(c.args) for c in seen] == [{"drop_publication": True}]


async def test_unknown_source_or_table_is_not_found(admin: Administration) -> None:
    with pytest.raises(NotFound, match="source 'nope'"):
        await admin.pause("nope")
    with pytest.raises(NotFound, match="table public.nope is not configured"):
        await admin.reload_table("pg", "public", "nope")
    with pytest.raises(InvalidRequest, match="table is required"):
        await admin.reload_table("pg", "public", "")
    with pytest.raises(NotFound, match="no fan-out target exists for table public.nope"):
        await admin.drain("public", "nope", 0)


async def test_nobody_answering_times_out_with_a_clear_message(store: InMemoryCoordinationStore) -> None:
    admin = Administration(store, catalog(), command_timeout=0.1)
    with pytest.raises(CommandTimedOut, match=r"no answer from ingest:pg within 0.1s"):
        await admin.pause("pg")


async def test_drain_addresses_the_named_instance_and_keeps_one_ready(store: InMemoryCoordinationStore,
                                                                        admin: Administration) -> None:
    assert not (await admin.drain("", "", 0)).accepted  # nobody to drain
    await beat(store, "fanout", "f1", fanout_report({"public.users": {}}))
    await beat(store, "fanout", "f2", fanout_report({"public.users": {}}))
    seen: list[Command] = []
    async with executing(store, "fanout:f1", "f1", seen=seen), executing(store, "fanout:f2", "f2", seen=seen):
        outcome = await admin.drain("public", "users", 30, instance_id="f2")
        assert outcome.accepted and len(outcome.results) == 1
        assert [c.target for c in seen] == ["fanout:f2"]
        args = dict(seen[0].args)
        assert (args["schema"], args["table"], args["instance_id"], args["deadline_unix_ms"] > 0) == (
            "public", "users", "f2", True)
        await beat(store, "fanout", "f2", fanout_report({"public.users": {"draining": "admin"}}))
        with pytest.raises(PreconditionFailed, match="instance f1 would leave no ready fan-out instance"):
            await admin.drain("", "users", 0, instance_id="f1")
        with pytest.raises(PreconditionFailed, match="a drain without an instance"):
            await admin.drain("", "", 0)
        assert len(seen) == 1  # refusals send nothing
        forced = await admin.drain("", "", 0, force=True)
    assert forced.accepted and forced.message.startswith("forced: no ready fan-out instance is left for public.users")
    assert sorted(c.target for c in seen[1:]) == ["fanout:f1", "fanout:f2"]
    with pytest.raises(InvalidRequest, match="drain_deadline_seconds"):
        await admin.drain("", "", -1)
    with pytest.raises(InvalidRequest, match="table is required"):
        await admin.drain("public", "", 0)
    with pytest.raises(NotFound, match="'f3' is not running"):
        await admin.drain("", "", 0, instance_id="f3")


async def test_store_unavailable_propagates(store: InMemoryCoordinationStore, admin: Administration) -> None:
    store.unavailable = True
    with pytest.raises(CoordinationUnavailable):
        await admin.pause("pg")


async def test_an_unknown_table_is_named_with_the_configured_ones(store: InMemoryCoordinationStore,
                                                                  admin: Administration) -> None:
    await beat(store, "ingest", "i2", ingest_report(source="other"))
    with pytest.raises(NotFound) as unknown:
        await admin.reload_table("", "nosuch", "table")
    assert str(unknown.value) == ("table nosuch.table is not configured; configured tables: public.orders, "
                                  "public.users (see ListTables)")
    with pytest.raises(NotFound) as elsewhere:
        await admin.reload_table("other", "public", "users")
    assert str(elsewhere.value) == ("table public.users is not configured for source other; it comes from source "
                                    "pg (leave the source out or name that one)")


def test_instances_that_answer_without_details_are_left_out_of_them() -> None:
    results = (CommandResult("c1", CommandStatus.SUCCEEDED, executed_by="host"),
               CommandResult("c2", CommandStatus.SUCCEEDED, details={"slot": "laredo_pg"}, executed_by="other"))
    assert Outcome(True, "", results).details == {"other": {"slot": "laredo_pg"}}
