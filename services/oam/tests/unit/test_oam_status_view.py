"""StatusView over the in-memory store with fake ingest and fan-out instances heartbeating."""

from __future__ import annotations

import pytest

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


async def test_paused_and_failed_sources(store: InMemoryCoordinationStore, view: StatusView) -> None:
    await beat(store, "fanout", "f1", fanout_report({"public.users": {}, "public.orders": {}}))
    await beat(store, "ingest", "i1", ingest_report(phase="paused"))
    assert (await view.system_status()).state is ServiceState.PAUSED
    assert (await view.check_ready()).ready  # paused holds its position and still serves
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
    assert [len(view.list_tables())] == [2]


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
