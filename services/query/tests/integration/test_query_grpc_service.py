"""The query service end to end on real NATS JetStream: synthetic change batches in, gRPC queries out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import nats
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from laredo.v1 import query_pb2 as pb
from laredo.v1 import query_pb2_grpc
from laredo_core.config import load_settings
from laredo_core.stream import naming
from laredo_kernel.tuples import UNCHANGED
from laredo_query.main import QueryApp, build
from laredo_testing.eventually import eventually
from services.query.tests.query_testkit import SOURCE, TABLE, Batches, client_row, row, truncate

pytestmark = pytest.mark.integration

STUBS = {"laredo.v1.TableSyncQuery": query_pb2_grpc.TableSyncQueryStub,
         "laredo.v1.LaredoQueryService": query_pb2_grpc.LaredoQueryServiceStub}


@dataclass
class Stream:
    js: Any
    prefix: str
    config: Path

    async def publish(self, *messages: bytes | list[bytes]) -> None:
        subject = naming.table_subject(self.prefix, SOURCE, TABLE)
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                await self.js.publish(subject, data)


def write_config(path: Path, nats_url: str, prefix: str) -> Path:
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{
  type = indexed-memory
  lookup_fields = [email]
  indexes = [ {{ name = by_status, fields = [status] }}, {{ name = by_status_qty, fields = [status, qty] }} ]
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
query {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0, drain_grace = 100ms }}
""")
    return path


@pytest.fixture
async def stream(nats_url: str, unique_name: str, tmp_path: Path) -> AsyncIterator[Stream]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    name = naming.stream_name(unique_name, SOURCE)
    await js.add_stream(name=name, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    try:
        yield Stream(js, unique_name, write_config(tmp_path / "laredo.conf", nats_url, unique_name))
    finally:
        await js.delete_stream(name)
        await nc.close()


@asynccontextmanager
async def running_app(config: Path) -> AsyncIterator[tuple[QueryApp, grpc.aio.Channel]]:
    app = build(load_settings(config, env={}))
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: app.started.is_set() or task.done(), what="the app to start")
    if task.done():
        task.result()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield app, channel
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, 10)


def text(v: str) -> struct_pb2.Value:
    return struct_pb2.Value(string_value=v)


async def http_ready(app: QueryApp) -> bool:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{app.health_port}/health/ready") as response:
            return response.status == 200


async def all_rows(stub: Any) -> dict[float, dict[str, Any]]:
    rows, token = {}, ""
    while True:
        page = await stub.ListRows(pb.ListRowsRequest(schema=TABLE.schema, table=TABLE.name, page_size=7,
                                                      page_token=token))
        rows.update({r.fields["id"].number_value: MessageToDict(r) for r in page.rows})
        token = page.next_page_token
        if not token:
            return rows


async def test_every_rpc_of_both_names_over_the_jetstream_feed(stream: Stream) -> None:
    b = Batches()
    model = {i: row(i, status="odd" if i % 2 else "even", doc="big" * 100) for i in range(1, 31)}
    async with running_app(stream.config) as (app, channel):
        assert not await http_ready(app)
        await stream.publish(b.baseline(list(model.values()), chunk_rows=8))
        await eventually(lambda: http_ready(app), what="ready once the baseline is in")
        await stream.publish(
            b.transaction(b.update({**row(1, status="paid"), "doc": UNCHANGED}), b.delete({"id": 2}),
                          b.update(row(100, status="moved"), old_key={"id": 3})),
            b.transaction(b.insert(row(31))))
        model[1] = {**model[1], "status": "paid"}
        model[100] = row(100, status="moved")
        model[31] = row(31)
        del model[2], model[3]
        for name, stub_type in STUBS.items():
            stub = stub_type(channel)
            await eventually(lambda s=stub: _equal(s, model), what=f"the {name} listing to equal the model")
            table = {"schema": TABLE.schema, "table": TABLE.name}
            assert (await stub.CountRows(pb.CountRowsRequest(**table))).count == len(model)
            found = await stub.Lookup(pb.LookupRequest(**table, key_values=[text("u1@example.com")]))
            assert MessageToDict(found.row) == client_row(model[1]), "TOASTed doc kept"
            moved = await stub.GetRow(pb.GetRowRequest(**table, primary_key=100))
            assert moved.found and not (await stub.GetRow(pb.GetRowRequest(**table, primary_key=3))).found
            odd = await stub.LookupAll(pb.LookupAllRequest(**table, index_name="by_status", key_values=[text("odd")]))
            assert [r.fields["id"].number_value for r in odd.rows] == list(range(5, 30, 2))
            pair = await stub.LookupAll(pb.LookupAllRequest(
                **table, index_name="by_status_qty", key_values=[text("even"), struct_pb2.Value(number_value=4)]))
            assert [r.fields["id"].number_value for r in pair.rows] == [4, 18]
            error = await _error(stub.Lookup(pb.LookupRequest(**table, index_name="nope", key_values=[text("x")])))
            assert error.code() == grpc.StatusCode.NOT_FOUND

        call = STUBS["laredo.v1.LaredoQueryService"](channel).Subscribe(
            pb.SubscribeRequest(schema=TABLE.schema, table=TABLE.name, replay_existing=True))
        replayed = [await call.read() for _ in range(len(model))]
        assert {r.new_values.fields["id"].number_value for r in replayed} == set(model)
        await stream.publish(b.transaction(truncate()))
        assert (await call.read()).action == "TRUNCATE"
        call.cancel()


async def _equal(stub: Any, model: dict[int, dict[str, Any]]) -> bool:
    return await all_rows(stub) == {float(k): client_row(v) for k, v in model.items()}


async def _error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_a_restarted_instance_rebuilds_the_same_state_from_the_stream(stream: Stream) -> None:
    b = Batches()
    await stream.publish(b.baseline([row(i) for i in range(1, 21)]),
                         b.transaction(*(b.update(row(i, status="again")) for i in range(1, 11))),
                         b.baseline([row(i) for i in range(5, 21)]),  # a re-baseline: rows 1-4 are gone
                         b.transaction(b.delete({"id": 20})))
    states: list[dict[float, dict[str, Any]]] = []
    for _ in range(2):
        async with running_app(stream.config) as (app, channel):
            await eventually(lambda a=app: http_ready(a), what="ready")
            states.append(await all_rows(STUBS["laredo.v1.TableSyncQuery"](channel)))
    assert states[0] == states[1] and sorted(states[0]) == [float(i) for i in range(5, 20)]
    assert states[0][5.0]["status"] == "new"

