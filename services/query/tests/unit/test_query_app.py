"""The wired query app on the in-memory feed: every RPC of both service names over a real gRPC server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from laredo.v1 import query_pb2 as pb
from laredo.v1 import query_pb2_grpc
from laredo_core.config import load_settings
from laredo_query.adapters.memory import MemoryChangeFeed
from laredo_query.entrypoints.grpc.servicer import QUERY_SERVICE_NAMES
from laredo_query.main import QueryApp, build
from laredo_testing.eventually import eventually
from services.query.tests.query_testkit import TABLE, Batches, client_row, row

STUBS = {"laredo.v1.TableSyncQuery": query_pb2_grpc.TableSyncQueryStub,
         "laredo.v1.LaredoQueryService": query_pb2_grpc.LaredoQueryServiceStub}
CONFIG = """
sources { pg { type = postgresql, connection = "host=unused" } }
tables = [ { source = pg, schema = public, table = items, targets = [ {
  type = indexed-memory, lookup_fields = [email], indexes = [ { name = by_status, fields = [status] } ] } ] } ]
query { subscriber_buffer = 256 }
"""


@dataclass
class Running:
    app: QueryApp
    feed: MemoryChangeFeed
    channel: grpc.aio.Channel
    batches: Batches

    def publish(self, *messages: bytes | list[bytes]) -> None:
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                self.feed.publish(TABLE, data)

    async def health(self, name: str) -> int:
        health = health_pb2_grpc.HealthStub(self.channel)
        return (await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)).status


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    feed = MemoryChangeFeed(json_values=True)
    app = build(load_settings(tmp_path / "laredo.conf", env={}), feed=feed, grpc_host="127.0.0.1", grpc_port=0,
                health_host="127.0.0.1", health_port=0, drain_grace=0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: app.started.is_set() or task.done(), what="the app to start")
    if task.done():
        task.result()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield Running(app, feed, channel, Batches())
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, 10)


def value(v: Any) -> struct_pb2.Value:
    out = struct_pb2.Value()
    if isinstance(v, str):
        out.string_value = v
    elif v is None:
        out.null_value = 0
    else:
        out.number_value = v
    return out


async def rpc_error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_readiness_follows_the_baseline_on_http_and_grpc_health(running: Running) -> None:
    url = f"http://127.0.0.1:{running.app.health_port}/health/ready"
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as response:
            assert response.status == 503
            assert (await response.json())["tables"]["public.items"]["baseline_complete"] is False
        for name in ("", *QUERY_SERVICE_NAMES, "public.items"):
            assert await running.health(name) == health_pb2.HealthCheckResponse.NOT_SERVING, name
        stub = query_pb2_grpc.TableSyncQueryStub(running.channel)
        error = await rpc_error(stub.CountRows(pb.CountRowsRequest(schema="public", table="items")))
        assert error.code() == grpc.StatusCode.UNAVAILABLE and "not loaded yet" in error.details()
        running.publish(running.batches.baseline([row(1)]))

        async def ready() -> bool:
            async with http.get(url) as response:
                return response.status == 200 and (await response.json())["tables"]["public.items"]["rows"] == 1

        await eventually(ready, what="HTTP readiness once the baseline is in")
        for name in ("", *QUERY_SERVICE_NAMES, "public.items"):
            async def serving(n: str = name) -> bool:
                return await running.health(n) == health_pb2.HealthCheckResponse.SERVING

            await eventually(serving, what=f"gRPC health SERVING for {name!r}")


async def test_reflection_lists_both_service_names(running: Running) -> None:
    reflection = reflection_pb2_grpc.ServerReflectionStub(running.channel)
    listed: set[str] = set()
    async for response in reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
            list_services="")])):
        listed |= {s.name for s in response.list_services_response.service}
    assert set(QUERY_SERVICE_NAMES) <= listed and "grpc.health.v1.Health" in listed


@pytest.mark.parametrize("name", list(STUBS))
async def test_every_rpc_answers_under_both_names(running: Running, name: str) -> None:
    b = running.batches
    running.publish(b.baseline([row(i, status="odd" if i % 2 else "even") for i in range(1, 8)]))
    await eventually(lambda: running.app.service.tables[0].ready, what="ready")
    stub = STUBS[name](running.channel)
    table = {"schema": "public", "table": "items"}
    found = await stub.Lookup(pb.LookupRequest(**table, key_values=[value("u3@example.com")]))
    assert found.found and MessageToDict(found.row) == client_row(row(3, status="odd"))
    assert not (await stub.Lookup(pb.LookupRequest(**table, key_values=[value("x")]))).found
    by_status = await stub.Lookup(pb.LookupRequest(**table, index_name="by_status", key_values=[value("even")]))
    assert by_status.row.fields["id"].number_value == 2
    everything = await stub.LookupAll(pb.LookupAllRequest(**table, index_name="by_status", key_values=[value("odd")]))
    assert [r.fields["id"].number_value for r in everything.rows] == [1, 3, 5, 7]
    assert (await stub.GetRow(pb.GetRowRequest(**table, primary_key=4))).row.fields["email"].string_value \
        == "u4@example.com"
    assert (await stub.GetRow(pb.GetRowRequest(**table, primary_key_values=[value("5")]))).found
    assert not (await stub.GetRow(pb.GetRowRequest(**table, primary_key=40))).found
    page = await stub.ListRows(pb.ListRowsRequest(**table, page_size=4))
    assert [r.fields["id"].number_value for r in page.rows] == [1, 2, 3, 4] and page.total_count == 7
    rest = await stub.ListRows(pb.ListRowsRequest(**table, page_size=4, page_token=page.next_page_token))
    assert [r.fields["id"].number_value for r in rest.rows] == [5, 6, 7] and rest.next_page_token == ""
    assert (await stub.CountRows(pb.CountRowsRequest(**table))).count == 7

    call = stub.Subscribe(pb.SubscribeRequest(**table, replay_existing=True))
    replayed = [await call.read() for _ in range(7)]
    assert sorted(r.new_values.fields["id"].number_value for r in replayed) == list(range(1, 8))
    assert {r.action for r in replayed} == {"INSERT"}
    running.publish(b.transaction(b.update(row(2, status="paid")), b.delete({"id": 3})))
    update, delete = await call.read(), await call.read()
    assert (update.action, update.old_values.fields["status"].string_value,
            update.new_values.fields["status"].string_value) == ("UPDATE", "even", "paid")
    assert delete.action == "DELETE" and delete.old_values.fields["id"].number_value == 3
    assert update.xid == b.xid and update.position < delete.position and update.timestamp.seconds == 1_700_000_000
    call.cancel()


@pytest.mark.parametrize("name", list(STUBS))
async def test_errors_map_to_the_specified_status_codes(running: Running, name: str) -> None:
    running.publish(running.batches.baseline([row(1)]))
    await eventually(lambda: running.app.service.tables[0].ready, what="ready")
    stub = STUBS[name](running.channel)
    invalid, not_found = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    cases = [
        (stub.Lookup(pb.LookupRequest(table="items")), invalid, "schema required"),
        (stub.CountRows(pb.CountRowsRequest(schema="public", table="nope")), not_found,
         "no indexed-memory target for public.nope"),
        (stub.LookupAll(pb.LookupAllRequest(schema="public", table="items", key_values=[value("x")])), invalid,
         "index_name is required"),
        (stub.Lookup(pb.LookupRequest(schema="public", table="items", index_name="by_x", key_values=[value(1)])),
         not_found, "no index named 'by_x'"),
        (stub.Lookup(pb.LookupRequest(schema="public", table="items", key_values=[value(1), value(2)])), invalid,
         "got 2 key value(s)"),
        (stub.Lookup(pb.LookupRequest(schema="public", table="items", key_values=[struct_pb2.Value()])), invalid,
         "key_values[0] has no value set"),
        (stub.GetRow(pb.GetRowRequest(schema="public", table="items", primary_key_values=[value(1.5)])), invalid,
         "not a whole number"),
        (stub.ListRows(pb.ListRowsRequest(schema="public", table="items", page_token="nonsense")), invalid,
         "page_token 'nonsense' is not one this service issued"),
        (stub.ListRows(pb.ListRowsRequest(schema="public", table="items", page_size=-5)), invalid,
         "page_size must not be negative"),
    ]
    for call, code, text in cases:
        error = await rpc_error(call)
        assert error.code() == code and text in error.details(), (code, text, error.details())
    subscribe = stub.Subscribe(pb.SubscribeRequest(schema="public", table="nope"))
    error = await rpc_error(subscribe.read())
    assert error.code() == not_found


async def test_a_slow_subscriber_loses_events_instead_of_stalling_the_feed(running: Running) -> None:
    b = running.batches
    running.publish(b.baseline([row(1, doc="x" * 200)]))
    await eventually(lambda: running.app.service.tables[0].ready, what="ready")
    stub = STUBS["laredo.v1.TableSyncQuery"](running.channel)
    call = stub.Subscribe(pb.SubscribeRequest(schema="public", table="items"))
    table = running.app.service.tables[0]
    await eventually(lambda: len(table.subscribers) == 1, what="the subscriber registered")
    published = 4000
    for i in range(published // 100):
        running.publish(b.transaction(*[b.update(row(1, qty=i * 100 + j, doc="x" * 200)) for j in range(100)]))
    await eventually(lambda: table.indexed.get(1).values["qty"] == published - 1, what="the feed applied everything")
    await eventually(lambda: table.subscribers.dropped > 0, what="drops counted")
    received = 0
    while received + table.subscribers.dropped < published:
        await asyncio.wait_for(call.read(), 5)
        received += 1
    assert received + table.subscribers.dropped == published and received >= 256
    ready, details = running.app.readiness()
    assert details["tables"]["public.items"]["subscriber_events_dropped"] == table.subscribers.dropped
    call.cancel()


async def test_shutdown_ends_subscriptions_with_unavailable(tmp_path: Path) -> None:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    feed = MemoryChangeFeed(json_values=True)
    app = build(load_settings(tmp_path / "laredo.conf", env={}), feed=feed, grpc_host="127.0.0.1", grpc_port=0,
                health_host="127.0.0.1", health_port=0, drain_grace=2)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(app.started.is_set, what="started")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
        call = STUBS["laredo.v1.TableSyncQuery"](channel).Subscribe(pb.SubscribeRequest(schema="public",
                                                                                         table="items"))
        await eventually(lambda: len(app.service.tables[0].subscribers) == 1, what="subscribed")
        stop.set()
        error = await rpc_error(call.read())
        assert error.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in error.details()
    await asyncio.wait_for(task, 10)


async def test_an_index_on_a_missing_column_answers_failed_precondition_and_stays_unready(tmp_path: Path) -> None:
    (tmp_path / "laredo.conf").write_text(CONFIG.replace("fields = [status]", "fields = [colour]"))
    feed = MemoryChangeFeed(json_values=True)
    app = build(load_settings(tmp_path / "laredo.conf", env={}), feed=feed, grpc_host="127.0.0.1", grpc_port=0,
                health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(app.started.is_set, what="started")
    for data in Batches().baseline([row(1)]):
        feed.publish(TABLE, data)
    await eventually(lambda: app.service.tables[0].loaded, what="loaded")
    ready, details = app.readiness()
    assert not ready and "colour" in details["tables"]["public.items"]["problems"][0]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
        stub = STUBS["laredo.v1.LaredoQueryService"](channel)
        error = await rpc_error(stub.LookupAll(pb.LookupAllRequest(schema="public", table="items",
                                                                   index_name="by_status", key_values=[value("x")])))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and "colour" in error.details()
        assert (await stub.Lookup(pb.LookupRequest(schema="public", table="items",
                                                   key_values=[value("u1@example.com")]))).found
    stop.set()
    await asyncio.wait_for(task, 10)
