"""OAM snapshot management against a real laredo-fanout process, Redis, NATS, S3 (moto) and a local directory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_kernel.position import Position
from laredo_testing.process import free_port
from laredo_testing.servers import RedisServer, S3Endpoint
from minio import Minio

from laredo_oam.main import build
from services.oam.tests.integration.snapshot_deployment import (
    AUDIT,
    ITEMS,
    ORDERS,
    S3_PREFIX,
    Deployment,
    deployment,
    rows,
)

pytestmark = pytest.mark.integration
CODE = grpc.StatusCode


@pytest.fixture
async def running(tmp_path: Path, nats_url: str, redis_url: str, s3_endpoint: S3Endpoint,
                  unique_name: str) -> AsyncIterator[Deployment]:
    async with deployment(tmp_path, nats_url=nats_url, redis_url=redis_url, s3=s3_endpoint, prefix=unique_name,
                          baseline_rows={ITEMS: 25, ORDERS: 4, AUDIT: 2}) as running:
        yield running


async def expect_code(call: object, code: grpc.StatusCode, *words: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    for word in words:
        assert word in caught.value.details(), caught.value.details()


def s3_objects(s3: S3Endpoint, bucket: str, snapshot_id: str) -> dict[str, int]:
    """name -> size of every object of an items snapshot, read from S3 itself."""
    client = Minio(s3.endpoint, s3.access_key, s3.secret_key, secure=s3.secure, region=s3.region)
    prefix = f"{S3_PREFIX}/{ITEMS}/{snapshot_id}/"
    return {o.object_name[len(prefix):]: o.size for o in client.list_objects(bucket, prefix=prefix, recursive=True)
            if o.object_name and o.size is not None}


async def create(stub: oam_pb2_grpc.TableSyncOAMStub, *tables: str, **meta: object) -> oam_pb2.CreateSnapshotResponse:
    user_meta = struct_pb2.Struct()
    user_meta.update(meta)
    response = await stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=tables, user_meta=user_meta),
                                         timeout=30)
    assert response.accepted, response.message
    return response


async def listed(stub: oam_pb2_grpc.TableSyncOAMStub, table: str = "", limit: int = 0) -> list[oam_pb2.SnapshotInfo]:
    response = await stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table=table, limit=limit), timeout=10)
    return list(response.snapshots)


async def test_create_list_inspect_delete_and_prune(running: Deployment, s3_endpoint: S3Endpoint) -> None:
    stub, batches = running.stub, running.batches[ITEMS]
    first = await create(stub, "public.items", reason="before upgrade", ticket=7)
    assert first.snapshot_id and "," not in first.snapshot_id and running.instance_id in first.message
    baseline_position = str(Position(batches.lsn, -1))  # fan-out's position at the end of a baseline

    info = (await stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest(snapshot_id=first.snapshot_id),
                                       timeout=10)).info
    assert [(t.schema, t.table, t.row_count, t.target_type) for t in info.tables] == [
        ("public", "items", 25, "replication-fanout")]
    assert [(p.source_id, p.position) for p in info.source_positions] == [("pg", baseline_position)]
    assert (info.format, info.store_type, info.store_location) == (
        "jsonl", "s3", f"s3://{running.prefix}/{S3_PREFIX}")
    assert dict(info.user_meta) == {"reason": "before upgrade", "ticket": 7.0}
    objects = s3_objects(s3_endpoint, running.prefix, first.snapshot_id)
    assert "manifest.json" in objects and info.size_bytes == sum(
        size for name, size in objects.items() if name.startswith("rows-")) > 0
    assert [s.snapshot_id for s in await listed(stub, "public.items")] == [first.snapshot_id]

    await running.publish(ITEMS, batches.transaction(batches.insert(rows(26, 1)[0])))
    await running.wait_rows(ITEMS, 26)
    second = await create(stub, "public.items")
    both = await create(stub, "public.items", "public.orders")
    items_id, orders_id = both.snapshot_id.split(",")
    newest_items = await listed(stub, "public.items")
    assert [s.snapshot_id for s in newest_items] == [items_id, second.snapshot_id, first.snapshot_id]
    assert (newest_items[1].tables[0].row_count, newest_items[1].source_positions[0].position) == (
        26, str(Position(batches.lsn, 0)))
    assert not newest_items[1].HasField("user_meta")
    everything = await listed(stub)
    assert {s.snapshot_id for s in everything} == {first.snapshot_id, second.snapshot_id, items_id, orders_id}
    assert [s.created_at.ToMilliseconds() for s in everything] == sorted(
        (s.created_at.ToMilliseconds() for s in everything), reverse=True)
    (orders,) = [s for s in everything if s.snapshot_id == orders_id]
    assert (orders.store_type, orders.store_location, orders.tables[0].row_count) == (
        "local", str(running.fanout.config.parent / "local-snapshots"), 4)
    assert [s.snapshot_id for s in await listed(stub, limit=1)] == [everything[0].snapshot_id]

    deleted = await stub.DeleteSnapshot(oam_pb2.DeleteSnapshotRequest(snapshot_id=first.snapshot_id), timeout=10)
    assert deleted.deleted and s3_objects(s3_endpoint, running.prefix, first.snapshot_id) == {}
    await expect_code(stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest(snapshot_id=first.snapshot_id),
                                           timeout=10), CODE.NOT_FOUND, first.snapshot_id)
    pruned = await stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=1, table="public.items"), timeout=10)
    assert pruned.deleted_count == 1
    assert [s.snapshot_id for s in await listed(stub)] == [s.snapshot_id for s in everything
                                                           if s.snapshot_id in (items_id, orders_id)]
    assert (await stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=1), timeout=10)).deleted_count == 0


async def test_error_codes_with_a_running_fanout(running: Deployment) -> None:
    stub = running.stub
    await expect_code(stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest(), timeout=10), CODE.INVALID_ARGUMENT,
                      "snapshot_id is required")
    await expect_code(stub.DeleteSnapshot(oam_pb2.DeleteSnapshotRequest(snapshot_id=""), timeout=10),
                      CODE.INVALID_ARGUMENT, "snapshot_id is required")
    await expect_code(stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=0), timeout=10),
                      CODE.INVALID_ARGUMENT, "keep must be at least 1")
    await expect_code(stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=-2), timeout=10),
                      CODE.INVALID_ARGUMENT, "keep must be at least 1")
    for call in (stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table="items"), timeout=10),
                 stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=1, table="public."), timeout=10),
                 stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["items"]), timeout=10)):
        await expect_code(call, CODE.INVALID_ARGUMENT, "expected 'schema.table'")
    await expect_code(stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest(snapshot_id="no-such-id"), timeout=10),
                      CODE.NOT_FOUND, "'no-such-id' not found", "s3 snapshot store", "local snapshot store")
    await expect_code(stub.DeleteSnapshot(oam_pb2.DeleteSnapshotRequest(snapshot_id="no-such-id"), timeout=10),
                      CODE.NOT_FOUND, "'no-such-id' not found")
    for call in (stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table="public.nope"), timeout=10),
                 stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["public.nope"]), timeout=10)):
        await expect_code(call, CODE.NOT_FOUND, "public.nope is not configured")
    for call in (stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table="public.audit"), timeout=10),
                 stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["public.audit"]), timeout=10)):
        await expect_code(call, CODE.FAILED_PRECONDITION, "public.audit has no snapshot store", "snapshot {")


def settings_text(redis_url: str, snapshot: str) -> str:
    return f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = replication-fanout, snapshot {{ {snapshot} }} }} ] }} ]
redis {{ url = "{redis_url}", key_prefix = oam-snapshots }}
stream {{ nats_url = "nats://127.0.0.1:{free_port()}" }}
oam {{ command_timeout = 5s }}
"""


async def test_unavailable_failed_precondition_and_internal_without_fanout(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("snapshots cannot live here")
    unreachable = f"http://127.0.0.1:{free_port()}"
    with RedisServer() as redis_server:
        for snapshot, store_words in (
                (f'store = local, store_config {{ path = "{not_a_directory}" }}', ("local snapshot store",
                                                                                   str(not_a_directory))),
                (f'store = s3, store_config {{ bucket = snaps, endpoint = "{unreachable}" }}',
                 ("s3 snapshot store", "s3://snaps/laredo/fanout-snapshots"))):
            path = tmp_path / "oam.conf"
            path.write_text(settings_text(redis_server.url, snapshot))
            app = build(load_settings(path, env={}), grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1",
                        health_port=0)
            stop = asyncio.Event()
            task = asyncio.create_task(app.run(stop))
            await asyncio.wait_for(app.started.wait(), 10)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
                stub = oam_pb2_grpc.TableSyncOAMStub(channel)
                await expect_code(stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(), timeout=30), CODE.INTERNAL,
                                  *store_words, "failed while listing its tables")
                await expect_code(stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["public.users"]),
                                                      timeout=10),
                                  CODE.FAILED_PRECONDITION, "no live fan-out instance serves table public.users")
                redis_server.stop()
                await expect_code(stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["public.users"]),
                                                      timeout=30),
                                  CODE.UNAVAILABLE, "coordination store (Redis) is unavailable")
                redis_server.start()
            stop.set()
            await asyncio.wait_for(task, 10)
