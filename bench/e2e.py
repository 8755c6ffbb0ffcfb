"""End-to-end figures: baseline rows/s, bulk-insert changes/s through ingest, commit-to-client latency.

Runs on throwaway PostgreSQL and NATS servers with `laredo-ingest` and `laredo-fanout` as processes:
  1. baseline of --baseline-rows rows: rows/s from the JetStream timestamps of BASELINE_BEGIN..END;
  2. one INSERT of --bulk-rows rows: changes/s from the commit to the JetStream ack of its last message;
  3. --latency-txns single-row transactions at --latency-rate/s: commit (PostgreSQL commit timestamp) to
     the moment the client library's replica applied the change, p50/p95/p99.
Usage: .venv/bin/python bench/e2e.py [--baseline-rows 10000] [--bulk-rows 100000] [--latency-txns 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nats
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laredo.replication.v1 import replication_pb2 as pb  # noqa: E402
from laredo_client import LaredoClient  # noqa: E402
from laredo_core.stream.naming import HEADER_KIND, stream_name  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer  # noqa: E402
from tests.e2e.harness import ServiceProcess, free_port, write_config  # noqa: E402

TABLE = "public.bench_items"


async def stream_messages(url: str, stream: str) -> list[tuple[int, str, float]]:
    """(sequence, kind header, stored time in unix seconds) of every message in the stream."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        last = (await js.stream_info(stream)).state.last_seq
        out = []
        for seq in range(1, last + 1):
            msg = await js.get_msg(stream, seq)
            stored = msg.time.timestamp() if msg.time else 0.0
            out.append((seq, (msg.headers or {}).get(HEADER_KIND, ""), stored))
        return out
    finally:
        await nc.close()


def confirmed_flush(dsn: str, slot: str) -> str:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name=%s",
                            (slot,)).fetchone()[0]


async def measure_bulk(pg: PostgresServer, slot: str, rows: int, offset: int) -> float:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        t0 = time.time()
        conn.execute(f"INSERT INTO {TABLE} (id, name, qty) SELECT g, 'bulk ' || g, g %% 1000 "
                     "FROM generate_series(%s::bigint, %s::bigint) g", (offset, offset + rows - 1))
        target = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
        committed = time.time()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # confirmation is the end-to-end signal: everything acked
        lsn = confirmed_flush(pg.dsn, slot)
        if _lsn(lsn) >= _lsn(target):
            break
        await asyncio.sleep(0.01)
    done = time.time()
    print(f"bulk insert of {rows:,} rows: commit took {committed - t0:.2f}s; "
          f"commit -> all acked by JetStream and confirmed: {done - committed:.2f}s")
    return rows / (done - committed)


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


class CommitTimes:
    """A StreamObserver noting each inserted row's commit time (from its journal entry) by id."""

    def __init__(self, offset: int) -> None:
        self.offset, self.by_id = offset, {}

    def opened(self, stream: str, request: pb.SyncRequest) -> None:
        return None

    def received(self, stream: str, message: bytes) -> None:
        response = pb.SyncResponse.FromString(message)
        kind = response.WhichOneof("message")
        entries = [response.journal_entry] if kind == "journal_entry" else (
            response.journal_batch.entries if kind == "journal_batch" else [])
        for entry in entries:
            row_id = int(entry.new_values.fields["id"].number_value) if entry.action == "INSERT" else 0
            if row_id >= self.offset:  # only the single-row transactions of this phase
                self.by_id[row_id] = entry.timestamp.seconds + entry.timestamp.nanos / 1e9

    def closed(self, stream: str) -> None:
        return None


async def measure_latency(pg: PostgresServer, port: int, txns: int, rate: float, offset: int) -> list[float]:
    latencies: list[float] = []
    commits = CommitTimes(offset)

    def on_change(old: dict | None, new: dict | None) -> None:
        committed = commits.by_id.pop(new["id"], None) if old is None and new is not None else None
        if committed is not None:
            latencies.append(time.time() - committed)

    async with LaredoClient(f"127.0.0.1:{port}", "public", "bench_items", client_id="latency",
                            stream_observer=commits) as client:
        await client.await_ready(120)
        client.listen(on_change)
        expected = await asyncio.to_thread(_count, pg.dsn)
        deadline = time.monotonic() + 300
        while client.count() < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # let fan-out finish applying the bulk insert before measuring

        def write() -> None:
            with psycopg.connect(pg.dsn, autocommit=True) as conn:
                for i in range(txns):
                    conn.execute(f"INSERT INTO {TABLE} (id, name, qty) VALUES (%s, 'lat', 0)", (offset + i,))
                    time.sleep(1.0 / rate)  # the offered load

        await asyncio.to_thread(write)
        deadline = time.monotonic() + 30
        while len(latencies) < txns and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    return latencies


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def run(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-bench-"))
    run_dir.chmod(0o755)
    with PostgresServer() as pg, NatsServer() as nats_server:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text NOT NULL, qty int)")
            conn.execute(f"INSERT INTO {TABLE} SELECT g, 'row ' || g, g %% 1000 "
                         "FROM generate_series(1, %s::bigint) g", (args.baseline_rows,))
        port, health = free_port(), {"ingest": free_port(), "fanout": free_port()}
        config = write_config(run_dir / "laredo.conf", pg_dsn=pg.dsn, nats_url=nats_server.url, source_id="bench",
                              slot="laredo_bench", prefix="laredo", tables=[TABLE], fanout_port=port,
                              health_ports=health)
        stream = stream_name("laredo", "bench")
        ingest = ServiceProcess("ingest", config, health["ingest"], run_dir / "ingest.log")
        fanout = ServiceProcess("fanout", config, health["fanout"], run_dir / "fanout.log")
        try:
            ingest.start()
            await asyncio.to_thread(ingest.wait_ready, 300)
            messages = await stream_messages(nats_server.url, stream)
            begin = next(t for _, k, t in messages if k == "BASELINE_BEGIN")
            end = next(t for _, k, t in messages if k == "BASELINE_END")
            baseline_rate = args.baseline_rows / max(end - begin, 1e-6)
            print(f"baseline: {args.baseline_rows:,} rows in {end - begin:.3f}s = {baseline_rate:,.0f} rows/s")
            fanout.start()
            await asyncio.to_thread(fanout.wait_ready, 300)
            bulk_rate = await measure_bulk(pg, "laredo_bench", args.bulk_rows, 10_000_000)
            print(f"bulk: {bulk_rate:,.0f} changes/s through ingest (commit -> JetStream acked -> confirmed)")
            lat = await measure_latency(pg, port, args.latency_txns, args.latency_rate, 50_000_000)
            if lat:
                ms = [x * 1000 for x in lat]
                print(f"commit-to-client latency over {len(ms)} single-row txns at {args.latency_rate:.0f}/s: "
                      f"p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms, p99 {pct(ms, 99):.2f} ms, "
                      f"max {max(ms):.2f} ms, mean {statistics.fmean(ms):.2f} ms")
            else:
                print("latency: no change reached the client")
        finally:
            fanout.stop()
            ingest.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-rows", type=int, default=10_000)
    parser.add_argument("--bulk-rows", type=int, default=100_000)
    parser.add_argument("--latency-txns", type=int, default=1000)
    parser.add_argument("--latency-rate", type=float, default=200.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
