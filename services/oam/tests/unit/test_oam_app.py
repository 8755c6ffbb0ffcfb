"""The OAM app: both service names serve status; every RPC of the specification is served; health works."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_core.coordination.ports import InstanceStatus
from laredo_testing.eventually import eventually

from laredo_oam.adapters.memory import InMemoryCoordinationStore, MemoryChangeTail
from laredo_oam.entrypoints.grpc.servicer import OAM_SERVICE_NAMES, OamServicer
from laredo_oam.main import App, build

STUBS = {"laredo.v1.TableSyncOAM": oam_pb2_grpc.TableSyncOAMStub,
         "laredo.v1.LaredoOAMService": oam_pb2_grpc.LaredoOAMServiceStub}


@dataclass
class RunningOam:
    app: App
    channel: grpc.aio.Channel
    task: asyncio.Task[None]
    store: InMemoryCoordinationStore


@pytest.fixture
async def oam_app() -> AsyncIterator[RunningOam]:
    settings = load_settings(None, env={})
    store = InMemoryCoordinationStore()
    app = build(settings, store=store, change_tail=MemoryChangeTail(), grpc_host="127.0.0.1", grpc_port=0,
                health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    started = asyncio.create_task(app.started.wait())
    await asyncio.wait({task, started}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # start-up failed: raise its error here
    assert started.done(), "OAM app did not start within 10s"
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield RunningOam(app, channel, task, store)
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, timeout=10)


IMPLEMENTED = {name for name in dir(OamServicer) if name[0].isupper()}


@pytest.mark.parametrize("service_name", sorted(STUBS))
async def test_get_status_answers_under_both_names(oam_app: RunningOam, service_name: str) -> None:
    stub = STUBS[service_name](oam_app.channel)
    response = await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)
    assert response.state == oam_pb2.SERVICE_STATE_STARTING  # nothing configured, nobody reporting


@pytest.mark.parametrize("service_name", sorted(STUBS))
async def test_watch_status_streams_under_both_names(oam_app: RunningOam, service_name: str) -> None:
    stub = STUBS[service_name](oam_app.channel)
    call = stub.WatchStatus(oam_pb2.WatchStatusRequest(), timeout=10)
    await call.initial_metadata()  # sent once the watch is in place
    await oam_app.store.heartbeat(InstanceStatus("ingest", "i1", {"source": "pg", "phase": "streaming"}), ttl=30)
    response = await call.read()  # the next registry read (about a second) sees the new source
    assert response.source_state_change.source_id == "pg"
    assert response.source_state_change.event_type == "connected"
    call.cancel()
    await eventually(lambda: oam_app.app.watch is not None and oam_app.app.watch.watchers == 0,
                     what="the watcher gone once the client cancelled")


def test_the_servicer_implements_every_rpc_of_both_service_names() -> None:
    for service_name in OAM_SERVICE_NAMES:
        service = oam_pb2.DESCRIPTOR.services_by_name[service_name.rsplit(".", 1)[1]]
        missing = {m.name for m in service.methods} - IMPLEMENTED
        assert not missing, f"{service_name} lacks {sorted(missing)}"


async def test_grpc_health_is_serving_for_the_server_and_both_names(oam_app: RunningOam) -> None:
    health = health_pb2_grpc.HealthStub(oam_app.channel)
    for name in ("", *OAM_SERVICE_NAMES):
        response = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
        assert response.status == health_pb2.HealthCheckResponse.SERVING, name


async def test_reflection_lists_both_names(oam_app: RunningOam) -> None:
    reflection = reflection_pb2_grpc.ServerReflectionStub(oam_app.channel)
    responses = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    listed = set()
    async for response in responses:
        listed |= {s.name for s in response.list_services_response.service}
    assert set(OAM_SERVICE_NAMES) <= listed
    assert "grpc.health.v1.Health" in listed


async def test_http_live_and_ready_once_serving(oam_app: RunningOam) -> None:
    url = f"http://127.0.0.1:{oam_app.app.health_port}/health/ready"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            assert response.status == 200
            assert (await response.json())["ready"] is True
        async with session.get(f"http://127.0.0.1:{oam_app.app.health_port}/health/live") as response:
            assert response.status == 200
