"""The snapshot service on real PostgreSQL, ingest, NATS, S3 (moto) and Spark local mode, with fan-out restoring.

Acceptance: a 100,000-row baseline and 20,000 changes (inserts, updates, deletes, primary-key updates, updates
keeping unchanged TOASTed values, a TRUNCATE) compacted in three runs — JSON lines, then Parquet — each snapshot
equal to the table at its position, and a fresh fan-out instance restored from the last one plus the stream tail
serves a client replica equal to the table. A compaction killed midway leaves the previous snapshot the newest,
and the next run works.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import nats
import psycopg
import pytest
from laredo_testing.eventually import eventually, wait_until
from minio import Minio

from google.protobuf.json_format import MessageToDict

from laredo.replication.v1 import replication_pb2 as pb
from laredo.replication.v1 import replication_pb2_grpc as pb_grpc
from laredo_client import LaredoClient
from laredo_kernel.changes import TableId
from laredo_core.config import load_settings
from laredo_kernel.jsonvalue import row_to_json
from laredo_kernel.position import Position, parse_lsn
from laredo_core.snapshots.factory import SnapshotStores
from laredo_core.snapshots.format import SnapshotManifest, decode_part, table_directory
from laredo_core.stream import naming
from laredo_core.stream.nats_tail import NatsStreamTail
from laredo_snapshot.adapters.memory import RecordingObserver
from laredo_snapshot.adapters.sequential_compactor import SequentialCompactor
from laredo_snapshot.main import SnapshotApp, build

from tests.e2e.harness import BIN, ServiceProcess, create_table, free_port, mixed_changes
from tests.e2e.system import LibraryReplica

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = "pg"
COLUMNS = "id, name, qty, note, updated_at"
BIG_NOTE_ROWS = 100  # rows whose note is stored out of line (TOAST): updates of other columns leave it "unchanged"


@dataclass
class Pipeline:
    dsn: str
    nats_url: str
    table: TableId
    prefix: str
    config: Path
    ingest: ServiceProcess
    s3: Any
    bucket: str
    tmp: Path
    health: dict[str, int]
    s3_endpoint: Any = None
    fanout_port: int = 0

    def write_config(self, serializer: str) -> None:
        """The same configuration with snapshots written as `serializer` (jsonl or parquet)."""
        write_config(self.config, dsn=self.dsn, nats_url=self.nats_url, table=self.table, prefix=self.prefix,
                     s3=self.s3_endpoint, bucket=self.bucket, health=self.health, fanout_port=self.fanout_port,
                     serializer=serializer)

    @property
    def stream(self) -> str:
        return naming.stream_name(self.prefix, SOURCE)

    def rows(self) -> dict[int, dict[str, Any]]:
        with psycopg.connect(self.dsn, options="-c TimeZone=UTC") as conn:
            cur = conn.execute(f"SELECT {COLUMNS} FROM {self.table}")
            names = [d.name for d in cur.description]
            return {r[0]: row_to_json(dict(zip(names, r))) for r in cur.fetchall()}


def write_config(path: Path, *, dsn: str, nats_url: str, table: TableId, prefix: str, s3: Any, bucket: str,
                 health: dict[str, int], fanout_port: int, serializer: str = "jsonl") -> Path:
    store = (f'store = s3, store_config {{ endpoint = "{s3.url}", bucket = {bucket}, prefix = snaps, '
             f'access_key = {s3.access_key}, secret_key = {s3.secret_key} }}')
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = {json.dumps(dsn)}, slot_mode = stateful,
  slot_name = slot_{prefix}, status_interval = 1s, reconnect {{ initial_backoff = 200ms, max_backoff = 2s }} }} }}
tables = [ {{ source = {SOURCE}, schema = {table.schema}, table = {table.name}, targets = [ {{
  type = replication-fanout, heartbeat_interval = 1s
  snapshot {{ interval = 0, {store}, part_rows = 4000, serializer = {serializer}, retention {{ keep_count = 10 }} }}
}} ] }} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {prefix} }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]} }}
fanout {{ grpc {{ host = 127.0.0.1, port = {fanout_port} }}, health_host = 127.0.0.1,
  health_port = {health["fanout"]} }}
snapshot {{ partitions = 2, spark {{ master = "local[2]" }}, health_host = 127.0.0.1, health_port = 0 }}
""")
    return path


@pytest.fixture
def pipeline(pg_dsn: str, nats_url: str, s3_endpoint: Any, unique_name: str, tmp_path: Path) -> Iterator[Pipeline]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 100_000)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # incompressible notes, kept out of line by TOAST
        conn.execute(f"UPDATE {table} SET note = (SELECT string_agg(md5(random()::text || g::text), '') "
                     f"FROM generate_series(1, 150) g WHERE id > 0) WHERE id <= {BIG_NOTE_ROWS}")
    health = {"ingest": free_port(), "fanout": free_port()}
    config = tmp_path / "laredo.conf"
    ingest = ServiceProcess("ingest", config, health["ingest"], tmp_path / "ingest.log")
    s3 = Minio(s3_endpoint.endpoint, access_key=s3_endpoint.access_key, secret_key=s3_endpoint.secret_key,
               secure=False, region="us-east-1")
    p = Pipeline(pg_dsn, nats_url, table, unique_name, config, ingest, s3, unique_name, tmp_path, health,
                 s3_endpoint, free_port())
    p.write_config("jsonl")
    ingest.start()
    try:
        ingest.wait_ready(90)
        yield p
    finally:
        ingest.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{unique_name}",))


@pytest.fixture
async def snapshot_app(pipeline: Pipeline, spark_sessions: Any) -> AsyncIterator[Callable[[], SnapshotApp]]:
    """Builds the snapshot service in this process from the pipeline's configuration file as it is now, on the
    session's SparkSession."""
    from laredo_snapshot.adapters.pyspark_compactor import PysparkCompactor
    from laredo_snapshot.adapters.spark_tasks import NatsTailOpener

    stores, observer = SnapshotStores(), RecordingObserver()
    tail = NatsStreamTail([pipeline.nats_url], pipeline.prefix, json_values=True)
    compactor = PysparkCompactor(spark_sessions, NatsTailOpener((pipeline.nats_url,), pipeline.prefix),
                                 stores.store_for, SequentialCompactor(tail, stores.store_for, observer), observer,
                                 partitions=2)

    def app() -> SnapshotApp:
        return build(load_settings(pipeline.config, env={}), compactor=compactor, tail=tail,
                     store_for=stores.store_for, observer=observer)

    yield app
    await tail.aclose()


@pytest.fixture(scope="module")
def spark_sessions() -> Iterator[Any]:
    from laredo_snapshot.adapters.spark_session import SparkSessions, SparkSettings

    sessions = SparkSessions(SparkSettings(master="local[2]", app_name="laredo-snapshot-e2e"))
    yield sessions
    sessions.stop()


async def published_through(pipeline: Pipeline, dsn_lsn: int) -> None:
    """Wait until the table's last stream message is a commit at or after `dsn_lsn`."""
    nc = await nats.connect(pipeline.nats_url)
    try:
        js = nc.jetstream()
        subject = naming.table_subject(pipeline.prefix, SOURCE, pipeline.table)

        async def reached() -> bool:
            headers = (await js.get_last_msg(pipeline.stream, subject)).headers or {}
            return parse_lsn(headers.get(naming.HEADER_COMMIT_LSN, "0/0")) >= dsn_lsn

        await eventually(reached, timeout=90, what=f"ingest published {pipeline.table}'s changes to the stream")
    finally:
        await nc.close()


def current_lsn(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return parse_lsn(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])


async def write_and_publish(pipeline: Pipeline, work: Any) -> None:
    await asyncio.to_thread(work)
    before = await asyncio.to_thread(current_lsn, pipeline.dsn)
    with psycopg.connect(pipeline.dsn, autocommit=True) as conn:  # a last commit after everything, to wait for
        conn.execute(f"UPDATE {pipeline.table} SET qty = qty WHERE id = (SELECT min(id) FROM {pipeline.table})")
    await published_through(pipeline, before)


def changes(pipeline: Pipeline, count: int, seed: int, first_new_id: int) -> None:
    rnd = random.Random(seed)
    with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
        live = [r[0] for r in conn.execute(f"SELECT id FROM {pipeline.table} WHERE id > {BIG_NOTE_ROWS}")]
        next_id = first_new_id
        for _ in range(count // 50):
            with conn.transaction():
                next_id = mixed_changes(conn, str(pipeline.table), rnd, live, next_id, 50)


def key_and_toast_changes(pipeline: Pipeline) -> None:
    with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
        for start in range(200, 1200, 100):  # 1,000 primary-key updates in 10 transactions
            conn.execute(f"UPDATE {pipeline.table} SET id = id + 5000000 WHERE id > %s AND id <= %s",
                         (start, start + 100))
        for _ in range(5):  # 500 updates of rows whose note stays in TOAST (the stream says "unchanged")
            conn.execute(f"UPDATE {pipeline.table} SET qty = qty + 1 WHERE id <= {BIG_NOTE_ROWS}")


def truncate_and_refill(pipeline: Pipeline) -> None:
    with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {pipeline.table}")
        conn.execute(f"INSERT INTO {pipeline.table} (id, name, qty, note) SELECT g, 'again ' || g, g % 7, "
                     f"md5(g::text) FROM generate_series(1, 3000) g")


async def snapshot_rows(pipeline: Pipeline, manifest: SnapshotManifest) -> dict[int, dict[str, Any]]:
    store = SnapshotStores().store_for(_store_config(pipeline))
    rows: list[dict[str, Any]] = []
    for part in manifest.parts:
        data = await store.read_part(pipeline.table, manifest.snapshot_id, part.name)
        rows += decode_part(manifest.format, data, part.name)
    assert len(rows) == manifest.row_count
    return {r["id"]: r for r in rows}


def _store_config(pipeline: Pipeline) -> Any:
    settings = load_settings(pipeline.config, env={})
    from laredo_snapshot.config import read_snapshot_config

    return read_snapshot_config(settings).tables[0].store


async def compact(app: Callable[[], SnapshotApp], pipeline: Pipeline, fmt: str = "jsonl") -> SnapshotManifest:
    (run,) = await app().run_once()
    assert run.outcome is not None and run.outcome.manifest is not None, run
    assert run.outcome.result is not None and run.outcome.result.engine == "spark"
    manifest = run.outcome.manifest
    assert manifest.format == fmt and all(p.name.endswith(f".{fmt}") for p in manifest.parts)
    assert Position.parse(manifest.source_position).lsn <= current_lsn(pipeline.dsn)
    assert await snapshot_rows(pipeline, manifest) == pipeline.rows(), "the snapshot equals SELECT * of the table"
    return manifest


async def test_snapshots_equal_the_table_and_a_fresh_fanout_restores_from_them(
        pipeline: Pipeline, snapshot_app: Callable[[], SnapshotApp]) -> None:
    first = await compact(snapshot_app, pipeline)  # from the baseline in the stream
    assert first.row_count == 100_000 and len(first.parts) >= 25

    await write_and_publish(pipeline, lambda: (changes(pipeline, 9_000, 1, 200_000), key_and_toast_changes(pipeline)))
    pipeline.write_config("parquet")  # from here on snapshots are Parquet: the JSON-lines base is read as it is
    second = await compact(snapshot_app, pipeline, "parquet")  # base + tail
    assert second.stream_sequence > first.stream_sequence
    assert any(i > 5_000_000 for i in (await snapshot_rows(pipeline, second)))

    await write_and_publish(pipeline, lambda: (truncate_and_refill(pipeline), changes(pipeline, 6_500, 2, 300_000)))
    third = await compact(snapshot_app, pipeline, "parquet")  # the TRUNCATE makes the base irrelevant
    assert third.stream_sequence > second.stream_sequence

    await asyncio.to_thread(changes, pipeline, 500, 3, 400_000)  # the tail a restored fan-out must replay
    fanout = ServiceProcess("fanout", pipeline.config, pipeline.health["fanout"], pipeline.tmp / "fanout.log")
    fanout.start()
    try:
        await asyncio.to_thread(fanout.wait_ready, 90)
        log = (pipeline.tmp / "fanout.log").read_text()
        assert f"restored snapshot {third.snapshot_id}" in log, fanout.log_tail()
        port = int(load_settings(pipeline.config, env={}).fanout.grpc_port)
        async with LaredoClient(f"127.0.0.1:{port}", pipeline.table.schema, pipeline.table.name,
                                client_id="after-restore") as client:
            await client.await_ready(60)
            replica = LibraryReplica(client)

            async def equal() -> bool:
                expected = await asyncio.to_thread(pipeline.rows)
                return replica.rows() == expected

            await eventually(equal, timeout=60, what="the client replica of the restored fan-out equals the table")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await listed_and_fetched(channel, pipeline, third)
    finally:
        fanout.stop()


async def listed_and_fetched(channel: grpc.aio.Channel, pipeline: Pipeline, manifest: SnapshotManifest) -> None:
    """Fan-out clients list the compacted snapshot and fetch rows equal to its part files."""
    stub = pb_grpc.TableSyncReplicationStub(channel)
    listed = await stub.ListSnapshots(pb.ListSnapshotsRequest(schema=pipeline.table.schema,
                                                              table=pipeline.table.name))
    info = next(s for s in listed.snapshots if s.snapshot_id == manifest.snapshot_id)
    assert (info.row_count, info.source_position, info.sequence) == (manifest.row_count, manifest.source_position, 0)
    fetched: dict[int, dict[str, Any]] = {}
    async for response in stub.FetchSnapshot(pb.FetchSnapshotRequest(snapshot_id=manifest.snapshot_id)):
        if response.WhichOneof("chunk") == "row":
            values = MessageToDict(response.row.row)
            fetched[int(values["id"])] = values
    stored = await snapshot_rows(pipeline, manifest)
    assert fetched.keys() == stored.keys()
    assert all(fetched[k]["name"] == stored[k]["name"] for k in stored)


def objects(pipeline: Pipeline) -> list[str]:
    prefix = f"snaps/{table_directory(pipeline.table)}/"
    return [o.object_name for o in pipeline.s3.list_objects(pipeline.bucket, prefix=prefix, recursive=True)]


def half_written(pipeline: Pipeline, known: set[str]) -> str | None:
    """The id of a snapshot that has parts but no manifest yet (None: none)."""
    by_id: dict[str, set[str]] = {}
    for name in objects(pipeline):
        snapshot_id, _, file = name.split("/", 2)[2].partition("/")
        by_id.setdefault(snapshot_id, set()).add(file)
    return next((i for i, files in by_id.items() if i not in known and "manifest.json" not in files and files), None)


async def test_a_compaction_killed_midway_leaves_the_previous_snapshot_newest(
        pipeline: Pipeline, snapshot_app: Callable[[], SnapshotApp]) -> None:
    previous = await compact(snapshot_app, pipeline)
    await write_and_publish(pipeline, lambda: changes(pipeline, 2_000, 4, 200_000))
    log = (pipeline.tmp / "snapshot.log").open("wb")
    job = subprocess.Popen([str(BIN / "laredo-snapshot"), "--config", str(pipeline.config), "--once"],
                           stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                           start_new_session=True)  # its own process group: the JVM and Python workers die with it
    try:
        killed = wait_until(lambda: job.poll() is None and half_written(pipeline, {previous.snapshot_id}),
                            timeout=120, what="the job wrote parts of a new snapshot (but not its manifest)")
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(10)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        log.close()
    store = SnapshotStores().store_for(_store_config(pipeline))
    listed = await store.list_snapshots(pipeline.table)
    assert [m.snapshot_id for m in listed] == [previous.snapshot_id], "the killed job's snapshot is invisible"
    assert any(killed in name for name in objects(pipeline))  # its parts are there, without a manifest

    after = await compact(snapshot_app, pipeline)  # the next run works, from the previous snapshot
    assert after.snapshot_id != killed and after.stream_sequence > previous.stream_sequence
