"""StatusView over the in-memory store with fake ingest and fan-out instances heartbeating."""

from __future__ import annotations

import pytest

from laredo_core.coordination.ports import InstanceStatus
from laredo_kernel.changes import TableId
from laredo_oam.adapters.memory import InMemoryCoordinationStore
from laredo_oam.application.status_view import StatusView
from laredo_oam.domain.catalog import Catalog, ConfiguredTable, ConfiguredTarget
from laredo_oam.domain.errors import InvalidRequest, NotFound, PreconditionFailed
from laredo_oam.domain.states import PipelineState, ServiceState
from laredo_oam.entrypoints.grpc import mappers
from services.oam.tests.oam_testkit import FANOUT, QUERY, beat, catalog, fanout_report, ingest_report

USERS = "pg:public.users:replication-fanout"
ORDERS = "pg:public.orders:replication-fanout"


@pytest.fixture
def store() -> InMemoryCoordinationStore:
    return InMemoryCoordinationStore()


@pytest.fixture
def view(store: InMemoryCoordinationStore) -> StatusView:
    return StatusView(store, catalog())


async def test_nobody_reporting_means_stopped_pipelines_and_not_ready(view: StatusView) -> None:
    status = await view.system_status()
    assert status.state is ServiceState.STARTING
    assert [p.state for p in status.pipelines] == [PipelineState.STOPPED, PipelineState.STOPPED]
    assert not status.sources[0].reporting
    readiness = await view.check_ready()
    assert not readiness.ready
    assert any("no ingest instance reports source pg" in r for r in readiness.not_ready_reasons)


async def test_streaming_everywhere(store: InMemoryCoordinationStore, view: StatusView) -> None:
    await beat(store, "ingest", "i1", ingest_report())
    await beat(store, "fanout", "f1", fanout_report({"public.users": {"rows": 42}, "public.orders": {}}))
    status = await view.system_status()
    assert status.state is ServiceState.STREAMING
    assert status.last_change_unix_ms == 0  # no change applied yet: heartbeats are not changes
    assert {p.pipeline_id: (p.state, p.row_count) for p in status.pipelines} == {
        USERS: (PipelineState.STREAMING, 42), ORDERS: (PipelineState.STREAMING, 10)}
    source = status.sources[0]
    assert (source.source_id, source.current_position, source.acked_position, source.lag_bytes) == (
        "pg", "0/16B3800", "0/16B3748", 184)
    assert source.lag_seconds == 0.25 and source.details["instance_id"] == "i1"
    assert (await view.check_ready()).ready


async def test_baselining_table_is_reported_and_not_ready(store: InMemoryCoordinationStore,
                                                          view: StatusView) -> None:
    await beat(store, "ingest", "i1", ingest_report())
    await beat(store, "fanout", "f1", fanout_report({"public.users": {"baseline_complete": False, "ready": False},
                                                     "public.orders": {}}))
    assert (await view.system_status()).state is ServiceState.BASELINING
    assert (await view.pipeline_status(USERS)).state is PipelineState.BASELINING
    assert (await view.pipeline_status(ORDERS)).state is PipelineState.STREAMING
    assert (await view.check_ready(pipeline_id=ORDERS)).ready
    users = await view.check_ready(table="public.users")
    assert not users.ready and users.not_ready_reasons == (f"pipeline {USERS} is baselining",)
    assert not (await view.check_ready(source="pg")).ready
    assert [p.state for p in await view.table_status("", "users")] == [PipelineState.BASELINING]


async def test_a_paused_source_is_not_ready_and_says_why(store: InMemoryCoordinationStore,
                                                         view: StatusView) -> None:
    await beat(store, "fanout", "f1", fanout_report({"public.users": {}, "public.orders": {}}))
    await beat(store, "ingest", "i1", ingest_report(phase="paused", lag_bytes=4096, lag_seconds=12.5))
    status = await view.system_status()
    assert status.state is ServiceState.PAUSED
    assert (status.sources[0].lag_bytes, status.sources[0].lag_seconds) == (4096, 12.5)
    readiness = await view.check_ready(pipeline_id=USERS)
    # Its target still serves what it has, but changes made since the pause are not applied: not current.
    assert not readiness.ready
    assert readiness.not_ready_reasons == (
        f"pipeline {USERS} is paused: source pg is paused by an operator (its slot is 4096 bytes of WAL behind): "
        "changes made since are not applied; resume it with ResumeSync (laredo resume pg)",)


async def test_failed_source(store: InMemoryCoordinationStore, view: StatusView) -> None:
    await beat(store, "fanout", "f1", fanout_report({"public.users": {}, "public.orders": {}}))
    await beat(store, "ingest", "i1", ingest_report(phase="failed", last_error="slot lost"))
    status = await view.system_status()
    assert status.state is ServiceState.ERROR
    assert status.pipelines[0].error_message == "slot lost"


async def test_draining_fanout_is_a_not_ready_reason(store: InMemoryCoordinationStore, view: StatusView) -> None:
    await beat(store, "ingest", "i1", ingest_report())
    await beat(store, "fanout", "f1", fanout_report({"public.users": {}, "public.orders": {}}, draining=True))
    readiness = await view.check_ready()
    assert readiness.not_ready_reasons == ("fan-out instance f1 is draining",)


async def test_standby_does_not_hide_the_leader(store: InMemoryCoordinationStore, view: StatusView) -> None:
    await beat(store, "ingest", "a-standby", ingest_report(phase="standby", leader=False))
    await beat(store, "ingest", "b-leader", ingest_report())
    [source] = await view.source_info("pg")
    assert source.details["instance_id"] == "b-leader"


async def test_unknown_names_are_not_found_and_missing_ones_invalid(view: StatusView) -> None:
    with pytest.raises(NotFound, match="pipeline 'pg:public.nope:replication-fanout' does not exist"):
        await view.pipeline_status("pg:public.nope:replication-fanout")
    with pytest.raises(InvalidRequest, match="pipeline_id is required"):
        await view.pipeline_status("")
    with pytest.raises(NotFound, match="table public.nope is not configured"):
        await view.table_status("public", "nope")
    with pytest.raises(InvalidRequest, match="table is required"):
        await view.table_status("public", "")
    with pytest.raises(NotFound, match="source 'other'"):
        await view.source_info("other")
    with pytest.raises(NotFound, match="source 'other'"):
        await view.check_ready(source="other")
    with pytest.raises(NotFound):
        await view.table_schema("public", "nope")


async def test_table_schema_from_reported_columns(store: InMemoryCoordinationStore, view: StatusView) -> None:
    with pytest.raises(PreconditionFailed, match="no running service has reported the columns"):
        await view.table_schema("public", "users")
    columns = [{"name": "id", "type": "int8", "not_null": True, "primary_key_ordinal": 1},
               {"name": "email", "type": "text"}]
    await beat(store, "fanout", "f1", fanout_report({"public.users": {"columns": columns}}))
    schema = await view.table_schema("public", "users")
    assert [(c.ordinal_position, c.name, c.data_type, c.not_null, c.primary_key_ordinal) for c in schema] == [
        (1, "id", "int8", True, 1), (2, "email", "text", False, 0)]


async def test_sources_reported_but_not_configured_are_listed(store: InMemoryCoordinationStore,
                                                              view: StatusView) -> None:
    await beat(store, "ingest", "i9", ingest_report(source="other"))
    assert [s.source_id for s in await view.source_info()] == ["other", "pg"]
    assert [len(await view.list_tables())] == [2]


async def test_each_pipeline_counts_the_dead_letters_its_target_instances_report(
        store: InMemoryCoordinationStore) -> None:
    configured = catalog()
    users = ConfiguredTable("pg", TableId("public", "users"),
                            (ConfiguredTarget(FANOUT, {}), ConfiguredTarget(QUERY, {})))
    view = StatusView(store, Catalog(configured.sources, (users, *configured.tables[1:])))
    await beat(store, "ingest", "i1", ingest_report())
    # Both fan-out instances read the same stream: the letters they record are the same ones, not a sum.
    await beat(store, "fanout", "f1", fanout_report({"public.users": {"dead_letters": 2}, "public.orders": {}}))
    await beat(store, "fanout", "f2", fanout_report({"public.users": {"dead_letters": 3}, "public.orders": {}}))
    await beat(store, "query", "q1", fanout_report({"public.users": {"dead_letters": 1}}))
    status = await view.system_status()
    query_users = "pg:public.users:indexed-memory"
    assert {p.pipeline_id: p.dead_letter_count for p in status.pipelines} == {USERS: 3, query_users: 1, ORDERS: 0}
    assert {p.pipeline_id: p.dead_letter_count for p in mappers.system_status(status).pipelines} == {
        USERS: 3, query_users: 1, ORDERS: 0}
    assert mappers.pipeline(await view.pipeline_status(query_users)).dead_letter_count == 1


async def test_list_tables_carry_the_primary_key_the_services_report(store: InMemoryCoordinationStore) -> None:
    users = ConfiguredTable("pg", TableId("public", "users"), (ConfiguredTarget(FANOUT, {}),))
    orders = ConfiguredTable("pg", TableId("public", "orders"), (ConfiguredTarget(FANOUT, {"primary_key": "no"}),))
    view = StatusView(store, Catalog(catalog().sources, (users, orders)))
    assert [listing.primary_key for listing in await view.list_tables()] == [(), ("no",)]  # none reported yet
    columns = [{"name": "tenant", "type": "int8", "primary_key_ordinal": 2}, {"name": "email", "type": "text"},
               {"name": "id", "type": "int8", "primary_key_ordinal": 1}]
    await beat(store, "fanout", "f1", fanout_report({"public.users": {"columns": columns}}))
    listed_users, listed_orders = await view.list_tables()
    assert (listed_users.primary_key, listed_orders.primary_key) == (("id", "tenant"), ("no",))
    [config] = mappers.table_configs(listed_users, view.catalog.source("pg"))
    assert (config.table, config.primary_key) == ("users", "id,tenant")


async def test_started_at_is_when_the_longest_running_instance_started(store: InMemoryCoordinationStore,
                                                                       view: StatusView) -> None:
    assert mappers.system_status(await view.system_status()).HasField("started_at") is False
    await store.heartbeat(InstanceStatus("ingest", "i1", ingest_report(), started_unix_ms=1_700_000_005_000), 30)
    await store.heartbeat(InstanceStatus("fanout", "f1", fanout_report({}), started_unix_ms=1_700_000_001_000), 30)
    status = await view.system_status()
    assert status.started_unix_ms == 1_700_000_001_000
    assert mappers.system_status(status).started_at.ToMilliseconds() == 1_700_000_001_000
    assert status.sources[0].details["instance_started_unix_ms"] == 1_700_000_005_000


async def test_pipelines_carry_the_last_baseline_the_applied_counts_and_the_indexes(
        store: InMemoryCoordinationStore) -> None:
    users = ConfiguredTable("pg", TableId("public", "users"), (ConfiguredTarget(QUERY, {}),))
    view = StatusView(store, Catalog(catalog().sources, (users,)))
    dropped = {"cause": "slot dropped", "detail": "replication slot laredo_pg was dropped",
               "baseline_id": "16B3748-1", "started_unix_ms": 1_700_000_000_000}
    await beat(store, "ingest", "i1", ingest_report(baselines={"public.users": dropped}))
    applied = {"inserts": 5, "updates": 3, "deletes": 1, "truncates": 0, "last_change_unix_ms": 1_700_000_060_000}
    indexes = {"by_email": {"fields": ["email"], "unique": True, "keys": 42, "shared_keys": 0}}
    await beat(store, "query", "q1", fanout_report({"public.users": {"applied": applied, "indexes": indexes}}))
    query_users = "pg:public.users:indexed-memory"
    pipeline = mappers.pipeline(await view.pipeline_status(query_users))
    assert (pipeline.last_baseline_reason, pipeline.last_baseline_detail, pipeline.last_baseline_id) == (
        "slot dropped", "replication slot laredo_pg was dropped", "16B3748-1")
    assert pipeline.last_baseline_at.ToMilliseconds() == 1_700_000_000_000
    assert (pipeline.inserts_applied, pipeline.updates_applied, pipeline.deletes_applied,
            pipeline.truncates_applied) == (5, 3, 1, 0)
    # the last change is the source commit time of the newest change applied, not a heartbeat's time
    assert pipeline.last_change_at.ToMilliseconds() == 1_700_000_060_000
    assert (await view.system_status()).last_change_unix_ms == 1_700_000_060_000
    [index] = mappers.indexes((await view.pipeline_status(query_users)).indexes)
    assert (index.name, list(index.fields), index.unique, index.entry_count) == ("by_email", ["email"], True, 42)


async def test_instances_are_listed_with_their_reports_by_service(store: InMemoryCoordinationStore,
                                                                 view: StatusView) -> None:
    await beat(store, "ingest", "i1", ingest_report())
    await beat(store, "fanout", "f2", {**fanout_report({"public.users": {}}), "draining": True})
    await beat(store, "fanout", "f1", fanout_report({"public.users": {"rows": 42}}))
    fanouts = await view.instances("fanout")
    assert [i.instance_id for i in fanouts] == ["f1", "f2"]
    answers = [mappers.instance_info(i) for i in fanouts]
    assert [(a.service, a.instance_id, a.ready, a.draining) for a in answers] == [
        ("fanout", "f1", True, False), ("fanout", "f2", True, True)]
    assert answers[0].status["tables"]["public.users"]["rows"] == 42 and answers[0].HasField("heartbeat_at")
    assert [i.service for i in await view.instances()] == ["fanout", "fanout", "ingest"]
    with pytest.raises(InvalidRequest, match="not a Laredo service; name one of ingest, fanout"):
        await view.instances("fanuot")
