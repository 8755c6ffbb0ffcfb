"""OAM over a real grpc.aio server and real Redis: status, administration and error codes, both names."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_testing.servers import RedisServer

from laredo_oam.main import App, build
from services.oam.tests.oam_testkit import beat, executing, fanout_report, ingest_report

pytestmark = pytest.mark.integration

STUBS = (oam_pb2_grpc.TableSyncOAMStub, oam_pb2_grpc.LaredoOAMServiceStub)
USERS = "pg:public.users:replication-fanout"


@dataclass
class Oam:
    app: App
    channel: grpc.aio.Channel
    services: RedisCoordinationStore  # the side the services' instances use

    def stubs(self) -> list[oam_pb2_grpc.TableSyncOAMStub]:
        return [stub(self.channel) for stub in STUBS]


def write_config(tmp_path: Path, redis_url: str, prefix: str) -> Path:
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = replication-fanout }} ] }} ]
redis {{ url = "{redis_url}", key_prefix = {prefix} }}
oam {{ command_timeout = 5s }}
""")
    return path


@pytest.fixture
async def oam_factory(tmp_path: Path, unique_name: str) -> AsyncIterator[Callable[[str], Awaitable[Oam]]]:
    running: list[tuple[Oam, asyncio.Event, asyncio.Task[None]]] = []

    async def start(redis_url: str) -> Oam:
        settings = load_settings(write_config(tmp_path, redis_url, unique_name), env={})
        app = build(settings, grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0)
        stop = asyncio.Event()
        task = asyncio.create_task(app.run(stop))
        await asyncio.wait_for(app.started.wait(), timeout=10)
        oam = Oam(app, grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}"),
                  RedisCoordinationStore(redis_url, unique_name))
        running.append((oam, stop, task))
        return oam

    yield start
    for oam, stop, task in running:
        await oam.channel.close()
        await oam.services.aclose()
        stop.set()
        await asyncio.wait_for(task, timeout=10)


async def expect_code(call: object, code: grpc.StatusCode, *words: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    for word in words:
        assert word in caught.value.details()


async def test_status_and_readiness_from_heartbeats(oam_factory, redis_url: str) -> None:
    oam = await oam_factory(redis_url)
    for stub in oam.stubs():
        status = await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)
        assert [p.state for p in status.pipelines] == [oam_pb2.PIPELINE_STATE_STOPPED]
    await beat(oam.services, "ingest", "i1", ingest_report())
    await beat(oam.services, "fanout", "f1", fanout_report({"public.users": {"baseline_complete": False}}))
    for stub in oam.stubs():
        status = await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)
        assert status.state == oam_pb2.SERVICE_STATE_BASELINING
        assert status.sources[0].acked_position == "0/16B3748" and status.sources[0].lag_bytes == 184
        ready = await stub.CheckReady(oam_pb2.CheckReadyRequest(table="users"), timeout=5)
        assert not ready.ready and ready.not_ready_reasons == [f"pipeline {USERS} is baselining"]
    await beat(oam.services, "fanout", "f1", fanout_report({"public.users": {"rows": 7}}))
    for stub in oam.stubs():
        pipeline = await stub.GetPipelineStatus(oam_pb2.GetPipelineStatusRequest(pipeline_id=USERS), timeout=5)
        assert (pipeline.status.state, pipeline.status.row_count) == (oam_pb2.PIPELINE_STATE_STREAMING, 7)
        assert (await stub.CheckReady(oam_pb2.CheckReadyRequest(source="pg"), timeout=5)).ready
        table = await stub.GetTableStatus(oam_pb2.GetTableStatusRequest(table="users"), timeout=5)
        assert [p.pipeline_id for p in table.pipelines] == [USERS]
        [info] = (await stub.GetSourceInfo(oam_pb2.GetSourceInfoRequest(source_id="pg"), timeout=5)).sources
        assert info.details["instance_id"] == "i1" and info.current_position == "0/16B3800"
        [config] = (await stub.ListTables(oam_pb2.ListTablesRequest(), timeout=5)).tables
        assert (config.source_id, config.schema, config.table, config.target_type) == (
            "pg", "public", "users", "replication-fanout")
        assert "connection" not in config.source_config


async def test_administration_commands_reach_the_instances(oam_factory, redis_url: str) -> None:
    oam = await oam_factory(redis_url)
    await beat(oam.services, "fanout", "f1", fanout_report({"public.users": {}}))
    async with executing(oam.services, "ingest:pg", "i1") as ingest_seen, \
            executing(oam.services, "fanout:f1", "f1") as fanout_seen:
        for stub in oam.stubs():
            reload = await stub.ReloadTable(oam_pb2.ReloadTableRequest(source_id="pg", table="users"), timeout=10)
            assert reload.accepted and "ingest:pg: succeeded" in reload.message
            assert (await stub.ReloadAll(oam_pb2.ReloadAllRequest(), timeout=10)).accepted
            paused = await stub.PauseSync(oam_pb2.PauseSyncRequest(source_id="pg"), timeout=10)
            assert paused.state == oam_pb2.SERVICE_STATE_PAUSED
            resumed = await stub.ResumeSync(oam_pb2.ResumeSyncRequest(), timeout=10)
            assert resumed.state == oam_pb2.SERVICE_STATE_STREAMING
            reset = await stub.ResetSource(oam_pb2.ResetSourceRequest(source_id="pg", confirm=True), timeout=10)
            assert reset.accepted and reset.details["i1"]["kind"] == "reset"
            await expect_code(stub.DrainReplication(oam_pb2.DrainReplicationRequest(instance_id="f1"), timeout=10),
                              grpc.StatusCode.FAILED_PRECONDITION, "no ready fan-out instance for public.users")
            drain = await stub.DrainReplication(oam_pb2.DrainReplicationRequest(
                drain_deadline_seconds=5, instance_id="f1", force=True), timeout=10)
            assert drain.accepted and drain.drained_targets == 1 and list(drain.drained_instances) == ["f1"]
    assert [c.kind.value for c in ingest_seen] == ["reload", "reload", "pause", "resume", "reset"] * 2
    assert [dict(c.args) for c in ingest_seen[:2]] == [{"schema": "public", "table": "users"}, {}]
    assert [c.kind.value for c in fanout_seen] == ["drain", "drain"]


async def test_error_codes(oam_factory, redis_url: str) -> None:
    oam = await oam_factory(redis_url)
    for stub in oam.stubs():
        await expect_code(stub.GetPipelineStatus(oam_pb2.GetPipelineStatusRequest(), timeout=5),
                          grpc.StatusCode.INVALID_ARGUMENT, "pipeline_id is required")
        await expect_code(stub.GetPipelineStatus(oam_pb2.GetPipelineStatusRequest(pipeline_id="bad"), timeout=5),
                          grpc.StatusCode.INVALID_ARGUMENT, "<source>:<schema>.<table>:<target-type>")
        await expect_code(stub.GetTableStatus(oam_pb2.GetTableStatusRequest(schema="public"), timeout=5),
                          grpc.StatusCode.INVALID_ARGUMENT, "table is required")
        await expect_code(stub.ReloadTable(oam_pb2.ReloadTableRequest(source_id="pg"), timeout=5),
                          grpc.StatusCode.INVALID_ARGUMENT, "table is required")
        await expect_code(stub.GetPipelineStatus(oam_pb2.GetPipelineStatusRequest(
            pipeline_id="pg:public.nope:replication-fanout"), timeout=5), grpc.StatusCode.NOT_FOUND, "does not exist")
        await expect_code(stub.GetTableStatus(oam_pb2.GetTableStatusRequest(table="nope"), timeout=5),
                          grpc.StatusCode.NOT_FOUND, "public.nope")
        await expect_code(stub.GetTableSchema(oam_pb2.GetTableSchemaRequest(table="nope"), timeout=5),
                          grpc.StatusCode.NOT_FOUND, "public.nope")
        await expect_code(stub.GetSourceInfo(oam_pb2.GetSourceInfoRequest(source_id="nope"), timeout=5),
                          grpc.StatusCode.NOT_FOUND, "'nope'")
        await expect_code(stub.CheckReady(oam_pb2.CheckReadyRequest(pipeline_id="pg:x.y:z"), timeout=5),
                          grpc.StatusCode.NOT_FOUND)
        await expect_code(stub.PauseSync(oam_pb2.PauseSyncRequest(source_id="nope"), timeout=5),
                          grpc.StatusCode.NOT_FOUND)
        await expect_code(stub.ResetSource(oam_pb2.ResetSourceRequest(source_id="pg"), timeout=5),
                          grpc.StatusCode.FAILED_PRECONDITION, "confirm=true")
        await expect_code(stub.DrainReplication(oam_pb2.DrainReplicationRequest(table="nope"), timeout=5),
                          grpc.StatusCode.NOT_FOUND, "no fan-out target")


async def test_redis_down_answers_unavailable_and_recovers(oam_factory) -> None:
    with RedisServer() as redis_server:
        oam = await oam_factory(redis_server.url)
        stub = oam.stubs()[0]
        await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)
        redis_server.stop()
        for call in (stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=10),
                     stub.PauseSync(oam_pb2.PauseSyncRequest(source_id="pg"), timeout=10),
                     oam.stubs()[1].CheckReady(oam_pb2.CheckReadyRequest(), timeout=10)):
            await expect_code(call, grpc.StatusCode.UNAVAILABLE, "Redis", "unavailable")
        redis_server.start()
        status = await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=10)
        assert status.state == oam_pb2.SERVICE_STATE_STARTING
