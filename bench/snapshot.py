"""Snapshot service figures: compaction rows/s on Spark (and in one process), the time per phase, and how soon a
fresh fan-out instance is ready from the snapshot versus from replaying the stream.

Runs throwaway NATS JetStream and S3 (moto) servers (or a local directory with --store local); a synthetic
table (id int8 key, name, qty, updated_at) is published to JetStream as ingest would (a baseline in chunks of
1,000 rows, then transactions of 100 changes); the compactors are called as the service calls them.
  1. baseline only: the first snapshot of --rows rows, from the stream's baseline, with 1, 2 and 4 partitions;
  2. with a tail: that snapshot plus --tail-percent % of changes (updates, inserts, deletes) after it;
  3. the sequential compactor (one process, no Spark) on the same two jobs, for comparison;
  4. with --formats ... parquet: steps 1 and 2 writing Parquet parts, with the most partitions;
  5. laredo-fanout started fresh: seconds until /health/ready restoring the snapshot + the tail after it
     (JSON lines, then Parquet), and replaying the whole stream instead (restore_on_start = false).
Every line gives the snapshot's size in the store.
Usage: .venv/bin/python bench/snapshot.py [--rows 1000000 10000000] [--partitions 1 2 4] [--formats jsonl parquet]
       [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import nats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laredo.stream.v1 import change_stream_pb2 as spb  # noqa: E402
from laredo_kernel.changes import ColumnInfo, TableId  # noqa: E402
from laredo_kernel.position import BASELINE_ORDINAL_BASE  # noqa: E402
from laredo_core.snapshots.config import StoreConfig  # noqa: E402
from laredo_core.snapshots.factory import SnapshotStores  # noqa: E402
from laredo_core.stream.codec import columns_to_proto  # noqa: E402
from laredo_core.stream.nats_tail import NatsStreamTail  # noqa: E402
from laredo_core.stream.naming import source_subject_filter, stream_name, table_subject  # noqa: E402
from laredo_kernel.tuples import encode_tuple  # noqa: E402
from laredo_snapshot.adapters.memory import RecordingObserver  # noqa: E402
from laredo_snapshot.adapters.nats_stream_bounds import NatsStreamBounds  # noqa: E402
from laredo_snapshot.adapters.pyspark_compactor import PysparkCompactor  # noqa: E402
from laredo_snapshot.adapters.sequential_compactor import SequentialCompactor  # noqa: E402
from laredo_snapshot.adapters.spark_session import SparkSessions, SparkSettings  # noqa: E402
from laredo_snapshot.adapters.spark_tasks import NatsTailOpener  # noqa: E402
from laredo_snapshot.domain.jobs import CompactionJob, CompactionResult, manifest_for  # noqa: E402
from laredo_testing.process import free_port  # noqa: E402
from laredo_testing.servers import NatsServer, S3Server  # noqa: E402

BIN = Path(sys.executable).parent
SOURCE, SCHEMA = "bench", "public"
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text", not_null=True),
    ColumnInfo("qty", 23, "int4"),
    ColumnInfo("updated_at", 1184, "timestamptz"),
)
_PROTO_COLUMNS = columns_to_proto(COLUMNS)


class Publisher:
    """ChangeBatch messages of one table, published with acks in windows."""

    def __init__(self, js: Any, prefix: str, table: TableId) -> None:
        self.js, self.table = js, table
        self.subject = table_subject(prefix, SOURCE, table)
        self.lsn, self.xid = 0x1000000, 1000

    def _batch(self, kind: int, **fields: Any) -> bytes:
        return spb.ChangeBatch(source_id=SOURCE, kind=kind, table=spb.TableRef(schema=SCHEMA, name=self.table.name),
                               columns=_PROTO_COLUMNS, **fields).SerializeToString()

    async def publish(self, messages: list[bytes]) -> None:
        for start in range(0, len(messages), 256):
            await asyncio.gather(*(self.js.publish(self.subject, m) for m in messages[start:start + 256]))

    async def baseline(self, rows: int, chunk: int = 1000) -> None:
        common = {"commit_lsn": self.lsn, "baseline_id": f"bench-{self.table.name}"}
        await self.publish([self._batch(spb.BATCH_KIND_BASELINE_BEGIN, **common)])
        for index, first in enumerate(range(1, rows + 1, chunk)):
            changes = [spb.Change(action=spb.ACTION_INSERT, ordinal=BASELINE_ORDINAL_BASE + i - 1,
                                  new_tuple=encode_tuple(_text_row(i, i % 1000)))
                       for i in range(first, min(first + chunk, rows + 1))]
            await self.publish([self._batch(spb.BATCH_KIND_BASELINE_ROWS, chunk=index, changes=changes, **common)])
        await self.publish([self._batch(spb.BATCH_KIND_BASELINE_END, baseline_row_count=rows, last_chunk=True,
                                        **common)])

    async def changes(self, rows: int, count: int, per_transaction: int = 100) -> None:
        """`count` changes: 70% updates, 20% inserts (new ids), 10% deletes, in transactions."""
        rnd, next_id, batch = random.Random(7), rows + 1, []
        for done in range(0, count, per_transaction):
            self.lsn += 0x100
            self.xid += 1
            changes = []
            for ordinal in range(min(per_transaction, count - done)):
                op = rnd.random()
                if op < 0.7:
                    change = spb.Change(action=spb.ACTION_UPDATE,
                                        new_tuple=encode_tuple(_text_row(rnd.randint(1, rows), 5000 + ordinal)))
                elif op < 0.9:
                    change = spb.Change(action=spb.ACTION_INSERT, new_tuple=encode_tuple(_text_row(next_id, 1)))
                    next_id += 1
                else:
                    key = encode_tuple([str(rnd.randint(1, rows)).encode(), None, None, None])
                    change = spb.Change(action=spb.ACTION_DELETE, old_tuple=key, old_is_key_only=True)
                change.ordinal = ordinal
                changes.append(change)
            batch.append(self._batch(spb.BATCH_KIND_TRANSACTION, commit_lsn=self.lsn, end_lsn=self.lsn + 0x30,
                                     xid=self.xid, last_chunk=True, changes=changes))
        await self.publish(batch)


def _text_row(i: int, qty: int) -> list[bytes]:
    return [str(i).encode(), f"item {i}".encode(), str(qty).encode(), b"2026-11-22 10:00:00+00"]


class Bench:
    def __init__(self, nats_url: str, store: StoreConfig, prefix: str, sessions: SparkSessions) -> None:
        self.nats_url, self.store, self.prefix, self.sessions = nats_url, store, prefix, sessions
        self.stores = SnapshotStores()
        self.tail = NatsStreamTail([nats_url], prefix, json_values=True, client_name="bench")
        self.sequential = SequentialCompactor(self.tail, self.stores.store_for, RecordingObserver())
        self.bounds = NatsStreamBounds([nats_url], prefix)
        self.runs = 0

    def spark(self, partitions: int) -> PysparkCompactor:
        return PysparkCompactor(self.sessions, NatsTailOpener((self.nats_url,), self.prefix), self.stores.store_for,
                                self.sequential, RecordingObserver(), partitions=partitions)

    async def compact(self, compactor: Any, table: TableId, base: Any = None, keep: bool = False,
                      fmt: str = "jsonl", visible: bool = True) -> tuple[CompactionResult, float, Any]:
        """One compaction; its snapshot is removed unless `keep` (then its manifest is written if `visible`)."""
        facts = await self.bounds.bounds(SOURCE, table)
        self.runs += 1
        job = CompactionJob(table, SOURCE, self.store, f"bench-{self.runs}", base,
                            base.stream_sequence if base is not None else 0, facts.table_last_sequence, facts.stream,
                            part_rows=100_000, format=fmt)
        started = time.perf_counter()
        result = await compactor.compact(job)
        seconds = time.perf_counter() - started
        assert result is not None
        manifest = manifest_for(job, result, time.time())
        store = self.stores.store_for(self.store)
        if keep:
            if visible:
                await store.write_manifest(manifest)
        else:
            await store.delete_snapshot(table, job.snapshot_id)
        return result, seconds, manifest


def line(what: str, result: CompactionResult, seconds: float) -> str:
    t = result.times
    size = sum(p.size_bytes for p in result.parts) / 2**20
    return (f"  {what:<52} {result.row_count:>10,} rows {seconds:7.1f}s {result.row_count / seconds:>9,.0f} rows/s"
            f" {size:7.1f} MiB   read tail {t.read_tail:5.1f}s  fold {t.fold:5.1f}s  write {t.write:5.1f}s"
            f"  checksum {t.checksum:4.1f}s"
            f"  ({result.messages:,} msgs, {result.changes:,} changes)")


async def run_size(bench: Bench, js: Any, rows: int, partitions: list[int], tail_percent: float,
                   sequential: bool, formats: list[str]) -> Any:
    """Steps 1-4 for one table size; returns the table, its kept JSON-lines baseline snapshot and (with parquet
    among the formats) a Parquet one of the same rows whose manifest is not written yet."""
    table = TableId(SCHEMA, f"items_{rows}")
    publisher = Publisher(js, bench.prefix, table)
    started = time.perf_counter()
    await publisher.baseline(rows)
    print(f"{rows:,} rows: baseline published in {time.perf_counter() - started:.1f}s", flush=True)
    base = parquet_base = None
    for p in partitions if "jsonl" in formats else []:
        result, seconds, manifest = await bench.compact(bench.spark(p), table, keep=p == partitions[-1])
        print(line(f"baseline only, {p} partition(s)", result, seconds), flush=True)
        base = manifest
    if "parquet" in formats:
        p = partitions[-1]
        result, seconds, parquet_base = await bench.compact(bench.spark(p), table, keep=True, fmt="parquet",
                                                            visible=base is not None)
        print(line(f"baseline only, {p} partition(s), Parquet", result, seconds), flush=True)
        if base is None:
            base, parquet_base = parquet_base, None
    if sequential:
        result, seconds, _ = await bench.compact(bench.sequential, table)
        print(line("baseline only, sequential", result, seconds), flush=True)
    tail = int(rows * tail_percent / 100)
    await publisher.changes(rows, tail)
    for p in partitions if "jsonl" in formats else []:
        result, seconds, _ = await bench.compact(bench.spark(p), table, base)
        print(line(f"+ tail of {tail:,} changes, {p} partition(s)", result, seconds), flush=True)
    if "parquet" in formats:
        p = partitions[-1]
        result, seconds, _ = await bench.compact(bench.spark(p), table, parquet_base or base, fmt="parquet")
        print(line(f"+ tail of {tail:,} changes, {p} partition(s), Parquet", result, seconds), flush=True)
    if sequential:
        result, seconds, _ = await bench.compact(bench.sequential, table, base)
        print(line(f"+ tail of {tail:,} changes, sequential", result, seconds), flush=True)
    return table, base, parquet_base


def fanout_ready_seconds(run_dir: Path, nats_url: str, prefix: str, table: TableId, store: StoreConfig,
                         restore: bool) -> float:
    health, port = free_port(), free_port()
    where = (f'store = local, store_config {{ path = "{store.path}" }}' if store.kind == "local" else
             f'store = s3, store_config {{ endpoint = "http://{store.endpoint}", bucket = {store.bucket}, '
             f'prefix = {store.prefix}, access_key = {store.access_key}, secret_key = {store.secret_key} }}')
    config = run_dir / f"fanout-{restore}.conf"
    config.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {SCHEMA}, table = {table.name}, targets = [ {{
  type = replication-fanout, snapshot {{ interval = 0, {where}, restore_on_start = {str(restore).lower()} }}
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
fanout {{ grpc {{ host = 127.0.0.1, port = {port} }}, health_host = 127.0.0.1, health_port = {health} }}
""")
    log = (run_dir / f"fanout-{restore}.log").open("wb")
    started = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "laredo-fanout"), "--config", str(config), "--log-level", "warning"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"laredo-fanout exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/health/ready", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - started
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)  # polling a process's readiness, as a load balancer would
    finally:
        proc.send_signal(signal.SIGKILL)  # no final snapshot: the next start finds the same store
        proc.wait(10)
        log.close()


async def main(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-bench-snapshot-"))
    nats_server = NatsServer()
    nats_server.start()
    s3_server = S3Server() if args.store == "s3" else None
    sessions = SparkSessions(SparkSettings(master=args.master, driver_memory=args.driver_memory))
    try:
        if s3_server is not None:
            s3_server.start()
            e = s3_server.endpoint
            store = StoreConfig(kind="s3", bucket="bench-snapshots", prefix="snaps", endpoint=e.endpoint,
                                access_key=e.access_key, secret_key=e.secret_key, region=e.region, secure=False)
        else:
            store = StoreConfig(path=str(run_dir / "snapshots"))
        prefix = "bench"
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.add_stream(name=stream_name(prefix, SOURCE), subjects=[source_subject_filter(prefix, SOURCE)])
        bench = Bench(nats_server.url, store, prefix, sessions)
        started = time.perf_counter()
        sessions.get()
        print(f"Spark {args.master} started in {time.perf_counter() - started:.1f}s; store {store.location}; "
              f"{os.cpu_count()} CPUs", flush=True)
        warm_up = TableId(SCHEMA, "warm_up")  # Python workers start and import Laredo once, not in the figures
        await Publisher(js, prefix, warm_up).baseline(1000)
        started = time.perf_counter()
        await bench.compact(bench.spark(max(args.partitions)), warm_up)
        print(f"first Spark job (workers start, imports): {time.perf_counter() - started:.1f}s", flush=True)
        for rows in args.rows:
            table, base, parquet_base = await run_size(bench, js, rows, args.partitions, args.tail_percent,
                                                       sequential=rows <= args.sequential_max, formats=args.formats)
            if rows <= args.fanout_max:
                restored = await asyncio.to_thread(fanout_ready_seconds, run_dir, nats_server.url, prefix, table,
                                                   store, True)
                replayed = await asyncio.to_thread(fanout_ready_seconds, run_dir, nats_server.url, prefix, table,
                                                   store, False)
                print(f"  fresh fan-out ready: {restored:.1f}s from the {base.format} snapshot + tail, "
                      f"{replayed:.1f}s replaying the stream", flush=True)
                if parquet_base is not None:  # the same rows as Parquet, now the newest snapshot
                    await bench.stores.store_for(store).write_manifest(parquet_base)
                    restored = await asyncio.to_thread(fanout_ready_seconds, run_dir, nats_server.url, prefix, table,
                                                       store, True)
                    print(f"  fresh fan-out ready: {restored:.1f}s from the parquet snapshot + tail", flush=True)
        await nc.close()
        await bench.tail.aclose()
        await bench.bounds.aclose()
    finally:
        sessions.stop()
        if s3_server is not None:
            s3_server.close()
        nats_server.close()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--tail-percent", type=float, default=10.0)
    parser.add_argument("--formats", nargs="+", choices=("jsonl", "parquet"), default=["jsonl", "parquet"],
                        help="snapshot formats to write (Parquet: with the most partitions only)")
    parser.add_argument("--store", choices=("s3", "local"), default="s3")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--sequential-max", type=int, default=1_000_000, help="largest table also run sequentially")
    parser.add_argument("--fanout-max", type=int, default=1_000_000, help="largest table for the fan-out start times")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 2 partitions")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.partitions = [100_000], [2]
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
