"""Restoring a snapshot into running fan-out and query instances, and replaying one, through OAM.

ingest, fan-out, query and OAM run as real processes on a throwaway PostgreSQL, NATS and Redis; snapshots go to
a local directory named by the fan-out target (the query service reads the same store). A fan-out client
(the client library, LaredoClient, checked for gaps and for keeping its first stream) stays connected across
the restore, and the query service's ListRows and the client are compared with SELECT * of the table.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from laredo.v1 import oam_pb2
from laredo_kernel.changes import TableId
from laredo_testing.eventually import eventually

from tests.e2e.harness import create_table, mixed_changes
from tests.e2e.system import (
    SOURCE,
    ChangeWriter,
    LibraryReplica,
    System,
    SystemConfig,
    connected_replica,
    everyone_equals_the_table,
    running_system,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def system(pg_dsn: str, nats_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 2_000)
    snapshots = tmp_path / "snapshots"
    config = SystemConfig(fanout_target=f"snapshot {{ interval = 0s, store = local, store_config {{ path = "
                                        f"{json.dumps(str(snapshots))} }} }}")
    with running_system(pg_dsn, nats_url, unique_name, table, tmp_path, redis_url=redis_url,
                        config=config) as running:
        yield running


@pytest.fixture
async def replica(system: System) -> AsyncIterator[LibraryReplica]:
    async with connected_replica(system, "restore-watcher") as connected:
        yield connected


async def take_snapshot(system: System) -> str:
    user_meta = struct_pb2.Struct()
    user_meta.update({"reason": "before the test's changes"})
    reply = await system.oam("CreateSnapshot", oam_pb2.CreateSnapshotRequest(tables=[str(system.table)],
                                                                            user_meta=user_meta))
    assert reply.accepted and reply.snapshot_id, reply.message
    return reply.snapshot_id


async def replay_state(system: System, replay_id: str) -> oam_pb2.GetReplayStatusResponse:
    return await system.oam("GetReplayStatus", oam_pb2.GetReplayStatusRequest(replay_id=replay_id))


async def ended(system: System, replay_id: str, timeout: float = 60) -> oam_pb2.GetReplayStatusResponse:
    return await eventually(lambda: _ended(system, replay_id), timeout=timeout, what=f"{replay_id} to end")


async def _ended(system: System, replay_id: str) -> oam_pb2.GetReplayStatusResponse | None:
    status = await replay_state(system, replay_id)
    return status if status.state != "running" else None


async def oam_error(system: System, rpc: str, request: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await system.oam(rpc, request)
    return error.value.code()


async def test_restore_re_baselines_fanout_and_query_while_a_client_stays_connected(
        system: System, replica: LibraryReplica) -> None:
    rep = replica
    snapshot_id = await take_snapshot(system)
    with psycopg.connect(system.dsn, autocommit=True) as conn:
        mixed_changes(conn, str(system.table), random.Random(3), list(range(1, 2_001)), 10_001, 300)
    await eventually(lambda: everyone_equals_the_table(system, rep), timeout=60,
                     what="fan-out client and query to equal the table after the changes")

    assert await oam_error(system, "RestoreSnapshot", oam_pb2.RestoreSnapshotRequest(snapshot_id=snapshot_id)) \
        is grpc.StatusCode.FAILED_PRECONDITION
    assert await oam_error(system, "RestoreSnapshot", oam_pb2.RestoreSnapshotRequest(
        snapshot_id="20000101T000000000Z-0-000000", confirm=True)) is grpc.StatusCode.NOT_FOUND

    sequence_before = rep.client.last_sequence
    with ChangeWriter(system.dsn, system.table, rate=200, first_id=20_001, seed=5) as writer:
        await eventually(lambda: writer.changes >= 100, timeout=30, what="changes to flow during the restore")
        reply = await system.oam("RestoreSnapshot", oam_pb2.RestoreSnapshotRequest(snapshot_id=snapshot_id,
                                                                                   confirm=True))
        assert reply.accepted, reply.message
        assert MessageToDict(reply.user_meta) == {"reason": "before the test's changes"}
        restore_id = re.search(r"restore-[0-9a-f]{12}", reply.message)
        assert restore_id is not None, reply.message
        status = await ended(system, restore_id.group())
        assert status.state == "completed", status
        assert status.rows_replayed >= 2_000
        written = writer.changes
        await eventually(lambda: writer.changes >= written + 100, timeout=30, what="changes after the restore")
    await eventually(lambda: everyone_equals_the_table(system, rep), timeout=60,
                     what="fan-out client and query to equal the table after the restore")
    rep.check()  # no gap, its first stream still open
    assert rep.client.last_sequence > sequence_before


async def test_replay_completes_and_a_slow_one_stops(system: System,
                                                      replica: LibraryReplica) -> None:
    rep = replica
    snapshot_id = await take_snapshot(system)
    for i in range(3):  # commits a quarter second apart: at 0.01x the replay waits 25 s between them
        system.sql(f"UPDATE {system.table} SET qty = %s WHERE id = %s", (1_000 + i, i + 1))
        await asyncio.sleep(0.25)
    await eventually(lambda: everyone_equals_the_table(system, rep), timeout=60, what="the updates applied")

    reply = await system.oam("StartReplay", oam_pb2.StartReplayRequest(
        snapshot_id=snapshot_id, target_pipeline_id=f"{SOURCE}:{system.table}:replication-fanout", speed="full"))
    assert reply.accepted and reply.replay_id, reply.message
    status = await ended(system, reply.replay_id)
    assert (status.state, status.rows_replayed) == ("completed", 2_000 + 3), status

    slow = await system.oam("StartReplay", oam_pb2.StartReplayRequest(snapshot_id=snapshot_id, speed="0.01x"))
    assert slow.accepted, slow.message
    await eventually(lambda: _rows_replayed_at_least(system, slow.replay_id, 2_001), timeout=30,
                     what="the slow replay into its paced tail")
    assert (await replay_state(system, slow.replay_id)).state == "running"
    stopped = await system.oam("StopReplay", oam_pb2.StopReplayRequest(replay_id=slow.replay_id))
    assert stopped.stopped
    assert (await ended(system, slow.replay_id)).state == "stopped"
    assert await oam_error(system, "GetReplayStatus", oam_pb2.GetReplayStatusRequest(replay_id="replay-0000")) \
        is grpc.StatusCode.NOT_FOUND
    await eventually(lambda: everyone_equals_the_table(system, rep), timeout=30, what="nothing changed by the stop")


async def _rows_replayed_at_least(system: System, replay_id: str, rows: int) -> bool:
    return (await replay_state(system, replay_id)).rows_replayed >= rows
