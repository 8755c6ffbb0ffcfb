"""Start decision (resume or baseline), server checks and publication plans, as tables."""

from __future__ import annotations

import dataclasses

import pytest

from laredo_kernel.changes import TableId

from laredo_ingest.domain.baseline_reason import BaselineCause
from laredo_ingest.domain.errors import MissingReplicationPrivilege, PublicationError, TableNotFound, WalLevelNotLogical
from laredo_ingest.domain.prerequisites import (
    PublicationChange,
    PublicationState,
    ServerFacts,
    check_server,
    check_tables_exist,
    plan_publication,
)
from laredo_ingest.domain.start_plan import (
    IngestState,
    SlotInfo,
    SlotMode,
    StartKind,
    StreamTail,
    current_epoch,
    epoch_for_baseline,
    plan_start,
    wal_behind_stream,
)

T1, T2, T3 = TableId("public", "a"), TableId("public", "b"), TableId("s", "c")
SLOT = SlotInfo("slot", "pgoutput", "db", False, False, 0x500)
STATE = IngestState("slot", "sys1", 0x400, True, ("public.a", "public.b"), "400-1")


def plan(**overrides):
    args = dict(mode=SlotMode.STATEFUL, slot_name="slot", database="db", slot=SLOT, state=STATE,
                system_identifier="sys1", tables=[T2, T1], always_baseline=False)
    args.update(overrides)
    return plan_start(**args)


def test_resume_when_slot_state_server_and_tables_match() -> None:
    assert plan().kind is StartKind.RESUME


@pytest.mark.parametrize(("overrides", "drop", "reason"), [
    ({"slot": None}, False, "does not exist"),
    ({"state": None}, True, "no ingest state"),
    ({"state": dataclasses.replace(STATE, baseline_complete=False)}, True, "did not complete"),
    ({"state": dataclasses.replace(STATE, slot_name="other")}, True, "belongs to slot other"),
    ({"system_identifier": "sys2"}, True, "server sys1"),
    ({"tables": [T1]}, True, "tables changed"),
    ({"tables": [T1, T2, T3]}, True, "tables changed"),
    ({"slot": dataclasses.replace(SLOT, plugin="test_decoding")}, True, "not a permanent pgoutput slot"),
    ({"slot": dataclasses.replace(SLOT, database="otherdb")}, True, "not a permanent pgoutput slot"),
    ({"slot": dataclasses.replace(SLOT, wal_status="lost")}, True, "invalidated"),
    ({"always_baseline": True}, True, "always_baseline"),
    ({"mode": SlotMode.EPHEMERAL}, True, "ephemeral"),
    ({"mode": SlotMode.EPHEMERAL, "slot": None}, False, "ephemeral"),
])
def test_baseline_otherwise(overrides: dict, drop: bool, reason: str) -> None:
    result = plan(**overrides)
    assert result.kind is StartKind.BASELINE
    assert result.drop_existing_slot is drop
    assert reason in result.reason


@pytest.mark.parametrize(("overrides", "cause"), [
    ({"slot": None, "state": None}, BaselineCause.INITIAL),
    ({"state": None}, BaselineCause.INITIAL),
    ({"slot": None}, BaselineCause.SLOT_DROPPED),
    ({"slot": dataclasses.replace(SLOT, wal_status="lost")}, BaselineCause.SLOT_INVALIDATED),
    ({"slot": dataclasses.replace(SLOT, plugin="test_decoding")}, BaselineCause.SLOT_UNUSABLE),
    ({"state": dataclasses.replace(STATE, baseline_complete=False)}, BaselineCause.PREVIOUS_INCOMPLETE),
    ({"slot": None, "state": dataclasses.replace(STATE, baseline_complete=False)},
     BaselineCause.PREVIOUS_INCOMPLETE),
    ({"state": dataclasses.replace(STATE, slot_name="other")}, BaselineCause.SLOT_CHANGED),
    ({"system_identifier": "sys2"}, BaselineCause.SERVER_CHANGED),
    ({"tables": [T1]}, BaselineCause.TABLES_CHANGED),
    ({"always_baseline": True}, BaselineCause.ALWAYS_BASELINE),
    ({"mode": SlotMode.EPHEMERAL}, BaselineCause.EPHEMERAL_SLOT),
])
def test_every_baseline_names_its_cause(overrides: dict, cause: BaselineCause) -> None:
    result = plan(**overrides)
    assert (result.kind, result.cause, result.baseline_reason.cause) == (StartKind.BASELINE, cause, cause)
    assert result.baseline_reason.detail
    assert plan().cause is None


FACTS = ServerFacts("127.0.0.1:5432/db", "app", "logical", False, True)


@pytest.mark.parametrize(("facts", "error", "words"), [
    (dataclasses.replace(FACTS, wal_level="replica"), WalLevelNotLogical, ["wal_level", "'replica'", "restart"]),
    (dataclasses.replace(FACTS, has_replication=False), MissingReplicationPrivilege,
     ["REPLICATION", 'ALTER ROLE "app" REPLICATION', "127.0.0.1:5432/db"]),
])
def test_server_checks_name_the_problem_and_the_fix(facts: ServerFacts, error: type, words: list[str]) -> None:
    with pytest.raises(error) as info:
        check_server(facts)
    for word in words:
        assert word in str(info.value)


def test_superuser_without_replication_attribute_is_fine() -> None:
    check_server(dataclasses.replace(FACTS, has_replication=False, is_superuser=True))
    check_server(FACTS)


def test_missing_tables_are_all_named() -> None:
    with pytest.raises(TableNotFound, match=r"public\.b, s\.c do not exist in here"):
        check_tables_exist([T1, T2, T3], [T1], "here")


@pytest.mark.parametrize(("current", "manage", "expected"), [
    (None, True, PublicationChange(create=True, add=(T1, T2))),
    (PublicationState(False, frozenset({T1, T2})), True, PublicationChange()),
    (PublicationState(False, frozenset({T1, T3})), True, PublicationChange(add=(T2,), drop=(T3,))),
    (PublicationState(True, frozenset({T3})), True, PublicationChange()),
    (PublicationState(False, frozenset({T1, T2, T3})), False, PublicationChange()),
])
def test_publication_plans(current, manage: bool, expected: PublicationChange) -> None:
    assert plan_publication("pub", current, [T2, T1], manage=manage, source_id="main") == expected


@pytest.mark.parametrize(("current", "words"), [
    (None, ["does not exist", "CREATE PUBLICATION", "sources.main.publication.create = true"]),
    (PublicationState(False, frozenset({T1})), ["does not publish public.b", "ALTER PUBLICATION"]),
])
def test_unmanaged_publication_problems_say_what_to_run(current, words: list[str]) -> None:
    with pytest.raises(PublicationError) as info:
        plan_publication("pub", current, [T1, T2], manage=False, source_id="main")
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(("overrides", "resync"), [
    ({"slot": None}, "was dropped"),
    ({"slot": dataclasses.replace(SLOT, wal_status="lost")}, "invalidated"),
    ({"slot": None, "state": dataclasses.replace(STATE, baseline_complete=False)}, ""),  # never streamed
    ({"slot": None, "state": dataclasses.replace(STATE, system_identifier="other")}, ""),  # another server
    ({"state": dataclasses.replace(STATE, tables=("public.a",))}, ""),  # a new table: no loss
    ({"mode": SlotMode.EPHEMERAL}, ""),
])
def test_lost_continuity_asks_for_a_resync(overrides: dict, resync: str) -> None:
    decision = plan(**overrides)
    assert decision.kind is StartKind.BASELINE
    assert (resync in decision.resync_reason) if resync else decision.resync_reason == ""


def test_table_fingerprints_decide_like_table_names() -> None:
    assert plan(tables=["public.a", "public.b"]).kind is StartKind.RESUME
    filtered = plan(tables=["public.a WHERE (x > 1)", "public.b"])
    assert filtered.kind is StartKind.BASELINE and "configured tables changed" in filtered.reason


def test_capacity_checks_name_the_limit_and_the_fix() -> None:
    from laredo_ingest.domain.errors import ReplicationCapacityExhausted, SourceMisconfigured
    from laredo_ingest.domain.prerequisites import check_capacity

    full = dataclasses.replace(FACTS, max_replication_slots=2, slots_in_use=("a", "b"))
    with pytest.raises(ReplicationCapacityExhausted, match=r"max_replication_slots = 2 and all are in use \(a, b\)"):
        check_capacity(full, slot_exists=False)
    check_capacity(full, slot_exists=True)  # ours is one of them
    with pytest.raises(ReplicationCapacityExhausted, match="max_wal_senders = 3 and 3"):
        check_capacity(dataclasses.replace(FACTS, max_wal_senders=3, wal_senders_in_use=3), slot_exists=True)
    with pytest.raises(SourceMisconfigured, match="max_wal_senders = 0") as info:
        check_capacity(dataclasses.replace(FACTS, max_wal_senders=0), slot_exists=True)
    assert not info.value.retryable


def test_restrictions_make_a_managed_publication_set_as_a_whole() -> None:
    from laredo_ingest.domain.prerequisites import PublishedTable, PublishedTableSpec

    spec = PublishedTableSpec(T1, ("id",), "id > 1")
    created = plan_publication("pub", None, [T1, T2], manage=True, source_id="main", restrictions=[spec])
    assert created.create and created.set_tables == (spec, PublishedTableSpec(T2))
    current = PublicationState(False, frozenset({T1, T2}), {
        T1: PublishedTable(T1, ("id", "x")), T2: PublishedTable(T2, ("id",), row_filter="(id > 2)")})
    change = plan_publication("pub", current, [T1, T2], manage=True, source_id="main")
    assert change.set_tables == (PublishedTableSpec(T1), PublishedTableSpec(T2))  # the filter is dropped
    with pytest.raises(PublicationError, match="no table of this source configures"):
        plan_publication("pub", current, [T1], manage=True, source_id="main",
                         restrictions=[PublishedTableSpec(T3, row_filter="true")])
    with pytest.raises(PublicationError, match=r"FOR TABLE public.a \(id\) WHERE \(id > 1\)"):
        plan_publication("pub", None, [T1], manage=False, source_id="main", restrictions=[spec])


@pytest.mark.parametrize(("tail", "epoch", "wal_lsn", "behind"), [
    (None, 0, 0x100, False),  # an empty stream: nothing to be behind
    (StreamTail(9, 0, 0x5000), 0, 0x6000, False),  # the WAL went on past the stream: continue
    (StreamTail(9, 0, 0x5000), 0, 0x5000, True),  # at the stream's last position: started again
    (StreamTail(9, 0, 0x5000), 0, 0x100, True),  # a restore, a lagging standby, a new database
    (StreamTail(9, 1, 0x5000), 2, 0x100, False),  # the stream's tail is of an earlier epoch than ours
    (StreamTail(9, 2, 0x5000), 2, 0x100, True),
])
def test_the_wal_is_behind_the_stream_only_at_or_before_its_last_position_in_this_epoch(
        tail: StreamTail | None, epoch: int, wal_lsn: int, behind: bool) -> None:
    reason = wal_behind_stream(tail, epoch, wal_lsn)
    assert bool(reason) is behind
    assert epoch_for_baseline(epoch, tail, wal_lsn) == epoch + behind
    if behind:
        assert "started again lower" in reason and "0/00005000" in reason


def test_the_current_epoch_is_the_later_of_the_state_and_the_stream() -> None:
    state = IngestState("s", "1", 0, True, (), epoch=3)
    assert current_epoch(None, None) == 0
    assert current_epoch(state, None) == 3
    assert current_epoch(state, StreamTail(1, 5, 0)) == 5
    assert current_epoch(None, StreamTail(1, 2, 0)) == 2
