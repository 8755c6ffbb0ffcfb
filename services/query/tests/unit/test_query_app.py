"""The query skeleton: both service names answer UNIMPLEMENTED; health, reflection and readiness work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from laredo.v1 import query_pb2, query_pb2_grpc
from laredo_core.config import load_settings

from laredo_query.entrypoints.grpc.servicer import QUERY_SERVICE_NAMES
from laredo_query.main import App, build

STUBS = {"laredo.v1.TableSyncQuery": query_pb2_grpc.TableSyncQueryStub,
         "laredo.v1.LaredoQueryService": query_pb2_grpc.LaredoQueryServiceStub}


@dataclass
class RunningQuery:
    app: App
    channel: grpc.aio.Channel
    task: asyncio.Task[None]


@pytest.fixture
async def query_app() -> AsyncIterator[RunningQuery]:
    settings = load_settings(None, env={})
    app = build(settings, grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    started = asyncio.create_task(app.started.wait())
    await asyncio.wait({task, started}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # start-up failed: raise its error here
    assert started.done(), "query app did not start within 10s"
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield RunningQuery(app, channel, task)
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, timeout=10)


@pytest.mark.parametrize("service_name", sorted(STUBS))
async def test_lookup_answers_unimplemented_naming_the_rpc(query_app: RunningQuery, service_name: str) -> None:
    stub = STUBS[service_name](query_app.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Lookup(query_pb2.LookupRequest(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "Lookup" in caught.value.details() and "later release" in caught.value.details()


@pytest.mark.parametrize("service_name", sorted(STUBS))
async def test_subscribe_stream_answers_unimplemented(query_app: RunningQuery, service_name: str) -> None:
    stub = STUBS[service_name](query_app.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.Subscribe(query_pb2.SubscribeRequest(schema="public", table="t"), timeout=5):
            pass
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "Subscribe" in caught.value.details()


async def test_every_rpc_of_both_names_answers_unimplemented(query_app: RunningQuery) -> None:
    for service_name in QUERY_SERVICE_NAMES:
        service = query_pb2.DESCRIPTOR.services_by_name[service_name.rsplit(".", 1)[1]]
        for method in service.methods:
            request_type = getattr(query_pb2, method.input_type.name)
            make_call = query_app.channel.unary_stream if method.server_streaming else query_app.channel.unary_unary
            call = make_call(f"/{service_name}/{method.name}", request_serializer=request_type.SerializeToString,
                             response_deserializer=lambda raw: raw)(request_type(), timeout=5)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                if method.server_streaming:
                    async for _ in call:
                        pass
                else:
                    await call
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED, f"{service_name}/{method.name}"
            assert method.name in caught.value.details()


async def test_grpc_health_is_serving_for_the_server_and_both_names(query_app: RunningQuery) -> None:
    health = health_pb2_grpc.HealthStub(query_app.channel)
    for name in ("", *QUERY_SERVICE_NAMES):
        response = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
        assert response.status == health_pb2.HealthCheckResponse.SERVING, name


async def test_reflection_lists_both_names(query_app: RunningQuery) -> None:
    reflection = reflection_pb2_grpc.ServerReflectionStub(query_app.channel)
    responses = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    listed = set()
    async for response in responses:
        listed |= {s.name for s in response.list_services_response.service}
    assert set(QUERY_SERVICE_NAMES) <= listed
    assert "grpc.health.v1.Health" in listed


async def test_http_live_and_ready_once_serving(query_app: RunningQuery) -> None:
    url = f"http://127.0.0.1:{query_app.app.health_port}/health/ready"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            assert response.status == 200
            assert (await response.json())["ready"] is True
        async with session.get(f"http://127.0.0.1:{query_app.app.health_port}/health/live") as response:
            assert response.status == 200
