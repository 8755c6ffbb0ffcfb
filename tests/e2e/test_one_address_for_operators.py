"""OAM's address also answers the Query service, sent on to ready query instances found in the coordination
store: one server address for `laredo` and for the Go CLI (Connect over HTTP/1.1, upstream names).

Real front doors (Envoy) on both services; the services' internals use in-memory stores and feeds.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from laredo.v1 import oam_pb2, query_pb2
from laredo_cli.main import run as laredo
from laredo_core.config import load_settings
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_oam.adapters.memory import MemoryChangeTail
from laredo_oam.main import App as OamApp
from laredo_oam.main import build as build_oam
from laredo_query.adapters.memory import MemoryChangeFeed
from laredo_query.main import QueryApp
from laredo_query.main import build as build_query
from laredo_testing.eventually import eventually
from laredo_testing.protocols import Caller, CallError
from services.query.tests.query_testkit import TABLE, Batches, row

CONFIG = """
sources { pg { type = postgresql, connection = "host=unused" } }
tables = [ { source = pg, schema = public, table = items, targets = [ {
  type = indexed-memory, lookup_fields = [email] } ] } ]
query { status_interval = 1s }
oam { query_routing { refresh = 200ms } }
"""
GET_ROW = "/laredo.v1.{service}/GetRow"
PROTOCOLS = ("grpc", "connect-http1-proto", "connect-http1-json", "grpc-web")


@dataclass
class System:
    oam: OamApp
    query: QueryApp
    feed: MemoryChangeFeed
    store: InMemoryCoordinationStore
    stops: list[asyncio.Event]
    tasks: list[asyncio.Task[None]]


async def _start(app: OamApp | QueryApp, stops: list[asyncio.Event], tasks: list[asyncio.Task[None]]) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    stops.append(stop)
    tasks.append(task)
    await eventually(lambda: app.started.is_set() or task.done(), what="the service to start", timeout=20)
    if task.done():
        task.result()


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    settings = load_settings(tmp_path / "laredo.conf", env={})
    store, feed = InMemoryCoordinationStore(block=0.05), MemoryChangeFeed()
    stops: list[asyncio.Event] = []
    tasks: list[asyncio.Task[None]] = []
    query = build_query(settings, feed=feed, coordination=store, grpc_host="127.0.0.1", grpc_port=0,
                        health_host="127.0.0.1", health_port=0, instance_id="q1")
    oam = build_oam(settings, store=store, change_tail=MemoryChangeTail(), grpc_host="127.0.0.1", grpc_port=0,
                    health_host="127.0.0.1", health_port=0)
    try:
        await _start(oam, stops, tasks)
        await _start(query, stops, tasks)
        yield System(oam, query, feed, store, stops, tasks)
    finally:
        for stop in stops:
            stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 20)


def _get_row(key: int) -> query_pb2.GetRowRequest:
    return query_pb2.GetRowRequest(schema="public", table="items", primary_key=key)


async def test_query_calls_on_the_oam_address_reach_a_ready_query_instance(system: System) -> None:
    oam_address = f"127.0.0.1:{system.oam.grpc_port}"
    # Not ready yet (no baseline): the OAM address has nowhere to send Query calls.
    with pytest.raises(CallError) as refused:
        await Caller(oam_address, "grpc").unary(GET_ROW.format(service="TableSyncQuery"), _get_row(1))
    assert refused.value.code == "UNAVAILABLE"

    for data in Batches().baseline([row(1), row(2)]):
        system.feed.publish(TABLE, data)
    assert system.oam.routing is not None
    await eventually(lambda: system.oam.routing.addresses == [f"127.0.0.1:{system.query.grpc_port}"],
                     what="OAM to route Query calls to the ready instance", timeout=10)

    async def answered(protocol: str, service: str) -> bool:
        try:
            got = await Caller(oam_address, protocol).unary(GET_ROW.format(service=service), _get_row(2))
        except CallError as exc:
            assert exc.code == "UNAVAILABLE", exc  # Envoy may not have read the new endpoints yet
            return False
        assert isinstance(got, query_pb2.GetRowResponse) and got.found
        return True

    await eventually(lambda: answered("grpc", "TableSyncQuery"), what="a Query answer on the OAM address",
                     timeout=10)
    for protocol in PROTOCOLS:
        for service in ("TableSyncQuery", "LaredoQueryService"):
            assert await answered(protocol, service), (protocol, service)
    # `laredo` with one address: Query commands go to the OAM address when no --query-server is given.
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(laredo, ["--server", oam_address, "get", "public.items", "2", "--json"],
                                   out=out, err=err, env={}, interactive=False)
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["row"]["id"] == 2, out.getvalue()
    # OAM's own RPCs are still OAM's, on the same address, as the Go CLI sends them.
    status = await Caller(oam_address, "connect-http1-proto").unary(
        "/laredo.v1.LaredoOAMService/GetStatus", oam_pb2.GetStatusRequest())
    assert isinstance(status, oam_pb2.GetStatusResponse)
    # Errors of the query instance come back as they are.
    with pytest.raises(CallError) as missing:
        await Caller(oam_address, "connect-http1-json").unary(
            GET_ROW.format(service="TableSyncQuery"),
            query_pb2.GetRowRequest(schema="public", table="nope", primary_key=1))
    assert missing.value.code == "NOT_FOUND"


async def test_an_instance_that_stops_being_ready_leaves_the_routes(system: System) -> None:
    for data in Batches().baseline([row(1)]):
        system.feed.publish(TABLE, data)
    assert system.oam.routing is not None
    await eventually(lambda: bool(system.oam.routing.addresses), what="the instance routed", timeout=10)
    system.stops[1].set()  # the query instance stops: it deregisters
    await eventually(lambda: system.oam.routing.addresses == [], what="the instance no longer routed",
                     timeout=10)
