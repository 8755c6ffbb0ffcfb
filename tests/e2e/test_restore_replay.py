"""Restoring a snapshot into running fan-out and query instances, and replaying one, through OAM.

ingest, fan-out, query and OAM run as real processes on a throwaway PostgreSQL, NATS and Redis; snapshots go to
a local directory named by the fan-out target (the query service reads the same store). A fan-out client
(laredo_client SyncReplica: it fails on any gap or repeat of sequences) stays connected across the restore,
and the query service's ListRows and the client are compared with SELECT * of the table.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from laredo.v1 import oam_pb2, oam_pb2_grpc, query_pb2, query_pb2_grpc
from laredo_client.replica import SyncReplica
from laredo_core.jsonvalue import row_to_json
from laredo_testing.eventually import eventually

from tests.e2e.harness import ServiceProcess, create_table, free_port, mixed_changes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLUMNS = "id, name, qty, note, updated_at"
SOURCE = "pg"


@dataclass
class System:
    dsn: str
    schema: str
    name: str
    ports: dict[str, int]
    services: dict[str, ServiceProcess]

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.name}"

    def channel(self, service: str) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(f"127.0.0.1:{self.ports[service]}")

    async def oam(self, rpc: str, request: Any) -> Any:
        async with self.channel("oam") as channel:
            return await getattr(oam_pb2_grpc.TableSyncOAMStub(channel), rpc)(request)

    def sql(self, statement: str, params: Any = None) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement, params)


def write_config(path: Path, *, dsn: str, nats_url: str, redis_url: str, prefix: str, table: str,
                 snapshots: Path, ports: dict[str, int], health: dict[str, int]) -> Path:
    schema, name = table.split(".")
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = {json.dumps(dsn)}, slot_name = slot_{prefix},
  status_interval = 1s }} }}
tables = [ {{ source = {SOURCE}, schema = {schema}, table = {name}, targets = [
  {{ type = replication-fanout, heartbeat_interval = 1s,
     snapshot {{ interval = 0s, store = local, store_config {{ path = {json.dumps(str(snapshots))} }} }} }},
  {{ type = indexed-memory }} ] }} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {prefix} }}
redis {{ url = {json.dumps(redis_url)}, key_prefix = {prefix} }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]}, heartbeat_interval = 1s }}
fanout {{ grpc {{ host = 127.0.0.1, port = {ports["fanout"]} }}, health_host = 127.0.0.1,
  health_port = {health["fanout"]}, status_interval = 1s }}
query {{ grpc {{ host = 127.0.0.1, port = {ports["query"]} }}, health_host = 127.0.0.1,
  health_port = {health["query"]}, status_interval = 1s }}
oam {{ grpc {{ host = 127.0.0.1, port = {ports["oam"]} }}, health_host = 127.0.0.1,
  health_port = {health["oam"]}, command_timeout = 15s }}
""")
    return path


@pytest.fixture
def system(pg_dsn: str, nats_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = f"public.{unique_name}"
    create_table(pg_dsn, table, 2_000)
    names = ("ingest", "fanout", "query", "oam")
    ports = {n: free_port() for n in ("fanout", "query", "oam")}
    health = {n: free_port() for n in names}
    config = write_config(tmp_path / "laredo.conf", dsn=pg_dsn, nats_url=nats_url, redis_url=redis_url,
                          prefix=unique_name, table=table, snapshots=tmp_path / "snapshots", ports=ports,
                          health=health)
    services = {n: ServiceProcess(n, config, health[n], tmp_path / f"{n}.log") for n in names}
    try:
        for service in services.values():
            service.start()
        for service in services.values():
            service.wait_ready(90)
        yield System(pg_dsn, "public", unique_name, ports, services)
    finally:
        for service in reversed(services.values()):
            service.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{unique_name}",))


@pytest.fixture
async def replica(system: System) -> AsyncIterator[tuple[SyncReplica, asyncio.Task[None]]]:
    async with system.channel("fanout") as channel:
        rep = SyncReplica(channel, system.schema, system.name, client_id="restore-watcher")
        task = asyncio.create_task(rep.run())  # raises SequenceGapError on any gap or repeat
        await rep.wait_ready(60)
        yield rep, task
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def table_rows(dsn: str, table: str) -> dict[int, dict[str, Any]]:
    with psycopg.connect(dsn, options="-c TimeZone=UTC") as conn:
        cur = conn.execute(f"SELECT {COLUMNS} FROM {table}")
        names = [d.name for d in cur.description]
        return {r[0]: row_to_json(dict(zip(names, r))) for r in cur.fetchall()}


async def query_rows(system: System) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    async with system.channel("query") as channel:
        stub, token = query_pb2_grpc.TableSyncQueryStub(channel), ""
        while True:
            page = await stub.ListRows(query_pb2.ListRowsRequest(schema=system.schema, table=system.name,
                                                                 page_size=1000, page_token=token))
            rows.update((int(v["id"]), v) for v in map(MessageToDict, page.rows))
            token = page.next_page_token
            if not token:
                return rows


async def everyone_equals_the_table(system: System, rep: SyncReplica) -> bool:
    for service in system.services.values():
        service.assert_running()
    expected = await asyncio.to_thread(table_rows, system.dsn, system.table)
    if {key[0]: row for key, row in rep.state.rows.items()} != expected:
        return False
    as_struct = {k: {c: float(v) if isinstance(v, int) else v for c, v in row.items()} for k, row in expected.items()}
    return await query_rows(system) == as_struct


class ChangeWriter:
    """Mixed changes in transactions of 10 at about `rate` changes/s, from a thread, until left."""

    def __init__(self, dsn: str, table: str, rate: float, first_id: int) -> None:
        self._dsn, self._table, self._rate, self._next_id = dsn, table, rate, first_id
        self._stop = threading.Event()
        self.changes = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="change-writer", daemon=True)

    def __enter__(self) -> ChangeWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise AssertionError(f"the change writer failed: {self.error!r}") from self.error

    def _run(self) -> None:
        rnd = random.Random(5)
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                live = [r[0] for r in conn.execute(f"SELECT id FROM {self._table}")]
                while not self._stop.is_set():
                    with conn.transaction():
                        self._next_id = mixed_changes(conn, self._table, rnd, live, self._next_id, 10, min_rows=100)
                    self.changes += 10
                    self._stop.wait(10 / self._rate)
        except BaseException as exc:  # noqa: BLE001 - reported by __exit__
            self.error = exc


async def take_snapshot(system: System) -> str:
    user_meta = struct_pb2.Struct()
    user_meta.update({"reason": "before the test's changes"})
    reply = await system.oam("CreateSnapshot", oam_pb2.CreateSnapshotRequest(tables=[system.table],
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
        system: System, replica: tuple[SyncReplica, asyncio.Task[None]]) -> None:
    rep, client = replica
    snapshot_id = await take_snapshot(system)
    with psycopg.connect(system.dsn, autocommit=True) as conn:
        mixed_changes(conn, system.table, random.Random(3), list(range(1, 2_001)), 10_001, 300)
    await eventually(lambda: everyone_equals_the_table(system, rep), timeout=60,
                     what="fan-out client and query to equal the table after the changes")

    assert await oam_error(system, "RestoreSnapshot", oam_pb2.RestoreSnapshotRequest(snapshot_id=snapshot_id)) \
        is grpc.StatusCode.FAILED_PRECONDITION
    assert await oam_error(system, "RestoreSnapshot", oam_pb2.RestoreSnapshotRequest(
        snapshot_id="20000101T000000000Z-0-000000", confirm=True)) is grpc.StatusCode.NOT_FOUND

    sequence_before = rep.state.last_sequence
    with ChangeWriter(system.dsn, system.table, rate=200, first_id=20_001) as writer:
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
    assert not client.done(), "the client's stream ended (a gap or repeat of sequences raises)"
    assert rep.state.last_sequence > sequence_before


async def test_replay_completes_and_a_slow_one_stops(system: System,
                                                      replica: tuple[SyncReplica, asyncio.Task[None]]) -> None:
    rep, _ = replica
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
