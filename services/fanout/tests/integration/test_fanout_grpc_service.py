"""The fan-out service end to end: JetStream in, gRPC Sync out, under both service names."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import nats
import pytest
from laredo_testing.eventually import eventually
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.replication.v1 import replication_pb2_grpc as rpb_grpc
from laredo_core.config import load_settings
from laredo_core.stream import naming
from laredo_core.telemetry import inject_headers
from laredo_fanout.main import FanoutApp, build
from services.fanout.tests.fanout_testkit import (
    SOURCE,
    TABLE,
    Batches,
    SyncReplica,
    as_client_rows,
    delete,
    insert,
    row,
    update,
)

pytestmark = pytest.mark.integration

STUBS = {
    "laredo.replication.v1.TableSyncReplication": rpb_grpc.TableSyncReplicationStub,
    "laredo.replication.v1.LaredoReplicationService": rpb_grpc.LaredoReplicationServiceStub,
}


@dataclass
class Running:
    app: FanoutApp
    channel: grpc.aio.Channel
    js: Any
    prefix: str
    spans: InMemorySpanExporter

    async def publish(self, data: bytes | list[bytes], headers: dict[str, str] | None = None) -> None:
        subject = naming.table_subject(self.prefix, SOURCE, TABLE)
        for message in data if isinstance(data, list) else [data]:
            await self.js.publish(subject, message, headers=headers)


def write_config(path: Path, nats_url: str, prefix: str) -> Path:
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{
  type = replication-fanout
  journal {{ max_entries = 1000, max_age = 1h }}
  heartbeat_interval = 200ms
  max_clients = 10
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0, drain_grace = 100ms }}
""")
    return path


@pytest.fixture
async def running(nats_url: str, unique_name: str, tmp_path: Path) -> AsyncIterator[Running]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = naming.stream_name(unique_name, SOURCE)
    await js.add_stream(name=stream, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    settings = load_settings(write_config(tmp_path / "laredo.conf", nats_url, unique_name), env={})
    app = build(settings, tracer_provider=provider)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: app.started.is_set() or task.done(), what="the app to start")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield Running(app, channel, js, unique_name, spans)
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, 10)
        await js.delete_stream(stream)
        await nc.close()


async def follow(call: Any, replica: SyncReplica) -> None:
    async for message in call:
        replica.apply(message)


async def test_sync_clients_of_both_names_replicate_the_stream(running: Running) -> None:
    batches = Batches()
    await running.publish(batches.baseline([row(i) for i in range(1, 51)], chunk_rows=20))
    await running.publish(batches.transaction(update(row(1, "one")), delete({"id": 2})))
    model = {i: row(i) for i in range(1, 51)}
    model[1] = row(1, "one")
    del model[2]

    clients, calls, followers = {}, [], []
    for index, (name, stub_type) in enumerate(STUBS.items()):
        call = stub_type(running.channel).Sync(rpb.SyncRequest(
            schema=TABLE.schema, table=TABLE.name, client_id=f"client-{index}", max_batch_size=16 * index))
        clients[name] = SyncReplica()
        calls.append(call)
        followers.append(asyncio.create_task(follow(call, clients[name])))
    for name, replica in clients.items():
        await eventually(lambda r=replica: r.rows == as_client_rows(list(model.values())),
                         what=f"the {name} replica to equal the table")
        assert replica.handshake is not None and replica.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT

    provider = running.app.tracer_provider
    assert provider is not None
    with provider.get_tracer("test").start_as_current_span("ingest.publish") as publish_span:
        headers = inject_headers()
    await running.publish(batches.transaction(insert(row(60)), update(row(3, "three"))), headers=headers)
    model[60], model[3] = row(60), row(3, "three")
    for name, replica in clients.items():
        await eventually(lambda r=replica: r.rows == as_client_rows(list(model.values())),
                         what=f"the {name} replica to get the live changes")
    assert clients["laredo.replication.v1.LaredoReplicationService"].batched_messages > 0

    trace_id = publish_span.get_span_context().trace_id
    traced = [s for s in running.spans.get_finished_spans() if s.context.trace_id == trace_id]
    apply = next(s for s in traced if s.name == "fanout.apply")
    assert apply.parent is not None and apply.parent.span_id == publish_span.get_span_context().span_id
    sends = [s for s in traced if s.name == "fanout.sync.send"]
    assert {s.attributes["laredo.client_id"] for s in sends} == {"client-0", "client-1"}
    assert all(s.parent is not None and s.parent.span_id == apply.context.span_id for s in sends)

    for name, stub_type in STUBS.items():
        status = await stub_type(running.channel).GetReplicationStatus(
            rpb.GetReplicationStatusRequest(schema=TABLE.schema, table=TABLE.name))
        assert status.current_sequence == 50 + 2 + 2
        assert (status.journal_oldest_sequence, status.journal_entry_count) == (1, 54)
        assert status.row_count == len(model) and status.connected_clients == 2
        assert sorted(c.client_id for c in status.clients) == ["client-0", "client-1"]
        assert all(c.state == "live" and c.current_sequence == 54 and c.connected_at.seconds for c in status.clients)
    for call in calls:
        call.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    await eventually(lambda: not running.app.targets.replicas[0].clients.clients(), what="clients to unregister")


async def test_readiness_follows_the_baseline(running: Running) -> None:
    url = f"http://127.0.0.1:{running.app.health_port}/health/ready"
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as response:
            assert response.status == 503
        await running.publish(Batches().baseline([row(1)]))

        async def ready() -> bool:
            async with http.get(url) as response:
                return response.status == 200 and (await response.json())["ready"]

        await eventually(ready, what="readiness once the baseline is in")


@pytest.mark.parametrize("name", list(STUBS))
async def test_bad_requests_get_clear_status_codes(running: Running, name: str) -> None:
    stub = STUBS[name](running.channel)
    cases = [(rpb.SyncRequest(schema="public"), grpc.StatusCode.INVALID_ARGUMENT, "table required"),
             (rpb.SyncRequest(schema="public", table="nope"), grpc.StatusCode.NOT_FOUND,
              "no fan-out target for public.nope")]
    for request, code, text in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.Sync(request):
                pass
        assert caught.value.code() == code and text in (caught.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as status_error:
        await stub.GetReplicationStatus(rpb.GetReplicationStatusRequest(schema="x", table="y"))
    assert status_error.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as snapshots_error:
        await stub.ListSnapshots(rpb.ListSnapshotsRequest(schema=TABLE.schema, table=TABLE.name))
    assert snapshots_error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no snapshot store" in (snapshots_error.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as fetch_error:
        async for _ in stub.FetchSnapshot(rpb.FetchSnapshotRequest(snapshot_id="nope")):
            pass
    assert fetch_error.value.code() == grpc.StatusCode.NOT_FOUND
