"""The snapshot RPCs over a real grpc.aio server with in-memory stores: every SnapshotInfo field, status codes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.memory_store import MemorySnapshotStore

from laredo_oam.adapters.memory import InMemoryCoordinationStore
from laredo_oam.config import read_oam_config
from laredo_oam.main import build
from services.oam.tests.snapshot_testkit import write_snapshot

CONFIG = """
sources { pg { type = postgresql, connection = "host=127.0.0.1 dbname=app" } }
tables = [
  { source = pg, table = users, targets = [ { type = replication-fanout, snapshot { interval = 0s, store = s3,
      store_config { bucket = snaps, prefix = "prod/fanout", endpoint = "http://minio:9000", secret_key = sk } } } ] }
  { source = pg, table = orders, targets = [ { type = replication-fanout, snapshot { store = local,
      store_config { path = /data/snaps } } } ] }
  { source = pg, table = audit, targets = [ { type = replication-fanout } ] }
]
"""


def settings(tmp_path: Path, text: str = CONFIG):  # type: ignore[no-untyped-def]
    path = tmp_path / "laredo.conf"
    path.write_text(text)
    return load_settings(path, env={})


@pytest.fixture
async def stub(tmp_path: Path, store: MemorySnapshotStore) -> AsyncIterator[oam_pb2_grpc.TableSyncOAMStub]:
    app = build(settings(tmp_path), store=InMemoryCoordinationStore(), snapshot_store=store, grpc_host="127.0.0.1",
                grpc_port=0, health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await asyncio.wait_for(app.started.wait(), 10)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield oam_pb2_grpc.TableSyncOAMStub(channel)
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.fixture
def store() -> MemorySnapshotStore:
    return MemorySnapshotStore()


async def expect_code(call: object, code: grpc.StatusCode, *words: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    for word in words:
        assert word in caught.value.details(), caught.value.details()


def test_each_table_gets_the_store_of_its_fanout_target(tmp_path: Path) -> None:
    stores = read_oam_config(settings(tmp_path)).snapshot_stores
    assert {str(t): (s.kind, s.location) for t, s in stores.items()} == {
        "public.users": ("s3", "s3://snaps/prod/fanout"), "public.orders": ("local", "/data/snaps")}
    assert stores[next(iter(stores))] == StoreConfig(kind="s3", bucket="snaps", prefix="prod/fanout",
                                                     endpoint="minio:9000", secret_key="sk", secure=False)
    with pytest.raises(ConfigError, match=r"tables\[0\].targets\[0\].snapshot.store_config.bucket: is required"):
        read_oam_config(settings(tmp_path, CONFIG.replace("bucket = snaps,", "")))


async def test_snapshot_info_fills_every_field(stub: oam_pb2_grpc.TableSyncOAMStub,
                                               store: MemorySnapshotStore) -> None:
    written = await write_snapshot(store, "public.users", 1_700_000_000.25, rows=5, snapshot_id="u-1",
                                   user_meta={"reason": "upgrade", "n": 2}, position="0/16B3748:7")
    await write_snapshot(store, "public.orders", 1_700_000_100.0, snapshot_id="o-1")
    listed = (await stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(), timeout=5)).snapshots
    assert [s.snapshot_id for s in listed] == ["o-1", "u-1"]
    info = (await stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest(snapshot_id="u-1"), timeout=5)).info
    assert info == listed[1]
    assert (info.snapshot_id, info.format, info.size_bytes) == ("u-1", "jsonl", written.size_bytes)
    assert info.created_at.ToMilliseconds() == 1_700_000_000_250
    assert [(p.source_id, p.position) for p in info.source_positions] == [("pg", "0/16B3748:7")]
    assert [(t.schema, t.table, t.row_count, t.target_type) for t in info.tables] == [
        ("public", "users", 5, "replication-fanout")]
    assert (info.store_type, info.store_location) == ("memory", "memory")
    assert dict(info.user_meta) == {"reason": "upgrade", "n": 2.0}
    assert not listed[0].HasField("user_meta")


async def test_create_delete_prune_and_their_codes(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                   store: MemorySnapshotStore) -> None:
    for i in range(3):
        await write_snapshot(store, "public.users", 100.0 + i, snapshot_id=f"u-{i}")
    assert (await stub.DeleteSnapshot(oam_pb2.DeleteSnapshotRequest(snapshot_id="u-0"), timeout=5)).deleted
    assert (await stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=1, table="public.users"),
                                      timeout=5)).deleted_count == 1
    listed = await stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table="public.users", limit=10), timeout=5)
    assert [s.snapshot_id for s in listed.snapshots] == ["u-2"]
    meta = struct_pb2.Struct()
    meta.update({"reason": "test"})
    code = grpc.StatusCode
    await expect_code(stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["public.users"], user_meta=meta)),
                      code.FAILED_PRECONDITION, "no live fan-out instance serves table public.users")
    await expect_code(stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["public.audit"])),
                      code.FAILED_PRECONDITION, "public.audit has no snapshot store")
    await expect_code(stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest(tables=["nodot"])), code.INVALID_ARGUMENT)
    await expect_code(stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest()), code.INVALID_ARGUMENT,
                      "snapshot_id is required")
    await expect_code(stub.InspectSnapshot(oam_pb2.InspectSnapshotRequest(snapshot_id="u-0")), code.NOT_FOUND,
                      "snapshot 'u-0' not found")
    await expect_code(stub.DeleteSnapshot(oam_pb2.DeleteSnapshotRequest(snapshot_id="nope")), code.NOT_FOUND)
    await expect_code(stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=0)), code.INVALID_ARGUMENT, "keep")
    await expect_code(stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table="public.nope")), code.NOT_FOUND)
    await expect_code(stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table="a.b.")), code.NOT_FOUND)
    await expect_code(stub.ListSnapshots(oam_pb2.ListSnapshotsRequest(table=".b")), code.INVALID_ARGUMENT)
    store.unavailable = True
    await expect_code(stub.ListSnapshots(oam_pb2.ListSnapshotsRequest()), code.INTERNAL,
                      "memory snapshot store memory failed while listing its tables", "injected fault")


async def test_without_stores_the_rpcs_answer_failed_precondition(tmp_path: Path) -> None:
    text = CONFIG.split("tables = [")[0] + "tables = [ { source = pg, table = audit, targets = [ " \
        "{ type = replication-fanout } ] } ]"
    app = build(settings(tmp_path, text), store=InMemoryCoordinationStore(), grpc_host="127.0.0.1", grpc_port=0,
                health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await asyncio.wait_for(app.started.wait(), 10)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
        stub = oam_pb2_grpc.TableSyncOAMStub(channel)
        for call in (stub.ListSnapshots(oam_pb2.ListSnapshotsRequest()),
                     stub.CreateSnapshot(oam_pb2.CreateSnapshotRequest()),
                     stub.PruneSnapshots(oam_pb2.PruneSnapshotsRequest(keep=1))):
            await expect_code(call, grpc.StatusCode.FAILED_PRECONDITION, "no snapshot store is configured",
                              "store_config")
    stop.set()
    await asyncio.wait_for(task, 10)


async def test_get_status_summarizes_what_the_snapshot_stores_hold(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                                   store: MemorySnapshotStore) -> None:
    empty = (await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)).snapshot_status
    assert (empty.enabled, empty.store_type, empty.snapshot_count, empty.last_snapshot_id) == (True, "memory", 0, "")
    await write_snapshot(store, "public.users", 1_700_000_000.0, snapshot_id="snap-old")
    await write_snapshot(store, "public.orders", 1_700_000_100.5, snapshot_id="snap-new")
    summary = (await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)).snapshot_status
    assert (summary.snapshot_count, summary.last_snapshot_id, summary.last_snapshot_at.ToMilliseconds()) == (
        2, "snap-new", 1_700_000_100_500)
