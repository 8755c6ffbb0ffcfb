"""Ingest throughput against pg_recvlogical on the same WAL, and lag under single-row transactions.

One run on throwaway PostgreSQL and NATS servers:
  1. bulk: --bulk-changes row changes (half INSERT, half UPDATE) in --bulk-txn-rows-row transactions, made
     while neither consumer reads, then drained: `pg_recvlogical` (pgoutput to /dev/null) from its slot,
     and ingest (decode, batch, publish to JetStream, confirm only what JetStream acknowledged) from its own;
  2. single-row: --single-txns one-row INSERT transactions, drained the same way;
  3. live single-row: ingest streaming while --single-txns more one-row transactions are committed by
     --writers pgbench connections, as fast as they can and at each of --live-rates; the slot's lag (bytes
     behind pg_current_wal_lsn) is sampled to tell whether it grows.
Prints changes/s for both consumers and the ratio ingest / pg_recvlogical per workload.
Each drain reads WAL already in the page cache (a first, untimed pg_recvlogical run reads it first).
Usage: .venv/bin/python bench/ingest.py [--bulk-changes 1000000] [--single-txns 100000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laredo_core.config import load_settings  # noqa: E402
from laredo_kernel.position import parse_lsn  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer  # noqa: E402

from laredo_ingest.main import build  # noqa: E402

PG_BIN = Path("/usr/lib/postgresql/15/bin")
INGEST_SLOT, RECV_SLOT, WARM_SLOT = "bench_ingest", "bench_recv", "bench_warm"
PUBLICATION = "bench_pub"
BENCH_SLOTS = (RECV_SLOT, WARM_SLOT)


def sql(dsn: str, statement: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def current_lsn(dsn: str) -> int:
    return parse_lsn(sql(dsn, "SELECT pg_current_wal_lsn()::text")[0][0])


def confirmed(dsn: str, slot: str) -> int:
    rows = sql(dsn, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    return parse_lsn(rows[0][0]) if rows and rows[0][0] else 0


def write_bulk(dsn: str, changes: int, txn_rows: int, first_id: int) -> int:
    """Half the changes as INSERT transactions, half as UPDATE transactions of txn_rows rows each."""
    inserts = changes // 2
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(first_id, first_id + inserts, txn_rows):
            conn.execute("INSERT INTO bench SELECT g, 'name ' || g, g %% 1000, 'x' "
                         "FROM generate_series(%s::bigint, %s::bigint) g",
                         (start, min(start + txn_rows, first_id + inserts) - 1))
        for start in range(first_id, first_id + changes - inserts, txn_rows):
            conn.execute("UPDATE bench SET qty = qty + 1 WHERE id BETWEEN %s AND %s",
                         (start, min(start + txn_rows, first_id + changes - inserts) - 1))
    return current_lsn(dsn)


async def write_single(pg: PostgresServer, txns: int, clients: int, first_id: int, run_dir: Path,
                       rate: float = 0) -> int:
    """txns one-row INSERT transactions from `clients` pgbench connections (a separate process, so the
    writers do not share this process's interpreter with ingest), at most `rate` per second (0: no limit)."""
    sql(pg.dsn, f"DROP SEQUENCE IF EXISTS bench_ids; CREATE SEQUENCE bench_ids START {first_id}")
    script = run_dir / "single.sql"
    script.write_text("INSERT INTO bench VALUES (nextval('bench_ids'), 'single', 1, 'x');\n")
    process = await asyncio.create_subprocess_exec(
        str(PG_BIN / "pgbench"), "-n", "-c", str(clients), "-j", str(clients), "-t", str(txns // clients), "-f",
        str(script), *(["-R", str(int(rate))] if rate else []), pg.dsn, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, stderr = await process.communicate()
    if process.returncode:
        raise RuntimeError(f"pgbench failed: {stderr.decode()}")
    return current_lsn(pg.dsn)


async def drain_recvlogical(pg: PostgresServer, end_lsn: int, slot: str = RECV_SLOT) -> float:
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        str(PG_BIN / "pg_recvlogical"), "-d", pg.dsn, "-S", slot, "--start", "-o", "proto_version=1", "-o",
        f"publication_names={PUBLICATION}", "--endpos", f"{end_lsn >> 32:X}/{end_lsn & 0xFFFFFFFF:X}",
        "--no-loop", "-f", "/dev/null")
    await process.wait()
    return time.monotonic() - started


class IngestRun:
    """The ingest service in this process, resuming its slot (its baseline was taken on the empty table)."""

    def __init__(self, config: Path) -> None:
        self._app = build(load_settings(config, env={}), state_bucket="bench_state")
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> float:
        """Start and wait until streaming; returns the time streaming began."""
        self._task = asyncio.create_task(self._app.run(self._stop))
        while not self._app.status.ready:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.002)
        return time.monotonic()

    async def wait_confirmed(self, lsn: int, timeout: float = 900) -> float:
        deadline = time.monotonic() + timeout
        while self._app.confirmed_lsn < lsn:
            if time.monotonic() > deadline or (self._task is not None and self._task.done()):
                raise RuntimeError(f"ingest did not confirm {lsn:X} (at {self._app.confirmed_lsn:X})")
            await asyncio.sleep(0.005)
        return time.monotonic()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 60)


async def drain_ingest(config: Path, end_lsn: int) -> float:
    run = IngestRun(config)
    started = await run.start()
    finished = await run.wait_confirmed(end_lsn)
    await run.stop()
    return finished - started


async def live_single(pg: PostgresServer, config: Path, txns: int, writers: int, first_id: int,
                      run_dir: Path, rate: float) -> dict:
    """ingest streaming while `writers` connections commit txns one-row transactions; lag sampled."""
    run = IngestRun(config)
    await run.start()
    samples: list[tuple[float, int, int]] = []  # (time, slot lag bytes, server WAL position)
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            head = await asyncio.to_thread(current_lsn, pg.dsn)
            samples.append((time.monotonic(), max(0, head - run._app.confirmed_lsn), head))
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    started = time.monotonic()
    await write_single(pg, txns, writers, first_id, run_dir, rate)
    written = time.monotonic()
    end = current_lsn(pg.dsn)
    caught_up = await run.wait_confirmed(end)
    done.set()
    await sampler
    await run.stop()
    during = [s for s in samples if s[0] <= written]
    lags = [lag for _, lag, _ in during]
    half = len(lags) // 2 or 1
    return {"write_rate": txns / (written - started), "catch_up": caught_up - written,
            "lag_first_half": statistics.fmean(lags[:half]) if lags else 0.0,
            "lag_second_half": statistics.fmean(lags[half:]) if lags[half:] else 0.0,
            "lag_max": max(lags) if lags else 0, **_trend(during)}


def _trend(samples: list[tuple[float, int, int]]) -> dict[str, float]:
    """The lag's least-squares slope and the WAL write rate over the same time, both in bytes/s."""
    if len(samples) < 3:
        return {"lag_slope": 0.0, "wal_rate": 0.0}
    times = [t for t, _, _ in samples]
    mean_t, mean_lag = statistics.fmean(times), statistics.fmean(lag for _, lag, _ in samples)
    variance = sum((t - mean_t) ** 2 for t in times) or 1e-9
    slope = sum((t - mean_t) * (lag - mean_lag) for t, lag, _ in samples) / variance
    wal_rate = (samples[-1][2] - samples[0][2]) / max(samples[-1][0] - samples[0][0], 1e-9)
    return {"lag_slope": slope, "wal_rate": wal_rate}


def write_config(path: Path, pg: PostgresServer, nats_url: str, max_batch_changes: int) -> Path:
    path.write_text(f"""
sources {{ bench {{ type = postgresql, connection = {json.dumps(pg.dsn)}, slot_name = {INGEST_SLOT},
  publication {{ name = {PUBLICATION}, create = false }}, status_interval = 1s, slot_check_interval = 2s }} }}
tables = [ {{ source = bench, table = bench, targets = [ {{ type = replication-fanout }} ] }} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = bench, max_batch_changes = {max_batch_changes} }}
ingest {{ health_host = 127.0.0.1, health_port = 0 }}
""")
    return path


async def drain_both(name: str, pg: PostgresServer, config: Path, end: int, changes: int) -> float:
    """A first pg_recvlogical run reads the WAL into the page cache; then ingest and pg_recvlogical, timed."""
    await drain_recvlogical(pg, end, WARM_SLOT)
    ingest_seconds = await drain_ingest(config, end)
    return report(name, changes, await drain_recvlogical(pg, end), ingest_seconds)


def report(name: str, changes: int, recv_seconds: float, ingest_seconds: float) -> float:
    recv_rate, ingest_rate = changes / recv_seconds, changes / ingest_seconds
    ratio = ingest_rate / recv_rate
    print(f"{name}: {changes:,} changes | pg_recvlogical {recv_rate:,.0f} changes/s ({recv_seconds:.2f}s) | "
          f"ingest -> JetStream (acked) {ingest_rate:,.0f} changes/s ({ingest_seconds:.2f}s) | ratio {ratio:.2f}",
          flush=True)
    return ratio


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="laredo-bench-ingest-") as directory:
        await run_in(Path(directory), args)


async def run_in(run_dir: Path, args: argparse.Namespace) -> None:
    with PostgresServer({"max_wal_size": "4GB"}) as pg, NatsServer() as nats_server:
        sql(pg.dsn, "CREATE TABLE bench (id bigint PRIMARY KEY, name text NOT NULL, qty int, note text)")
        sql(pg.dsn, f"CREATE PUBLICATION {PUBLICATION} FOR TABLE bench")
        config = write_config(run_dir / "laredo.conf", pg, nats_server.url, args.max_batch_changes)
        first = IngestRun(config)  # baseline of the empty table, creating the ingest slot
        await first.start()
        await first.stop()
        for slot in BENCH_SLOTS:
            sql(pg.dsn, "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        print(f"workload 1: {args.bulk_changes:,} changes in {args.bulk_txn_rows:,}-row transactions ...", flush=True)
        end = await asyncio.to_thread(write_bulk, pg.dsn, args.bulk_changes, args.bulk_txn_rows, 1)
        bulk = await drain_both("bulk", pg, config, end, args.bulk_changes)
        print(f"workload 2: {args.single_txns:,} single-row transactions ...", flush=True)
        end = await write_single(pg, args.single_txns, args.writers, 50_000_000, run_dir)
        single = await drain_both("single-row", pg, config, end, args.single_txns)
        for slot in BENCH_SLOTS:
            sql(pg.dsn, "SELECT pg_drop_replication_slot(%s)", (slot,))
        for rate in args.live_rates:
            live = await live_single(pg, config, args.single_txns, args.writers, 60_000_000 + rate * 1000,
                                     run_dir, rate)
            print(f"live single-row, {args.single_txns:,} transactions from {args.writers} pgbench connections "
                  f"{'as fast as they can' if not rate else f'at {rate:,.0f}/s'}: committed {live['write_rate']:,.0f} "
                  f"txn/s; slot lag mean {live['lag_first_half']:,.0f} B (first half) -> "
                  f"{live['lag_second_half']:,.0f} B (second half), max {live['lag_max']:,} B, trend "
                  f"{live['lag_slope'] / 1024:+,.0f} KiB/s against {live['wal_rate'] / 1024:,.0f} KiB/s of WAL; "
                  f"caught up {live['catch_up']:.2f}s after the last commit; "
                  f"{'LAG GREW (ingest fell behind)' if grows(live) else 'kept pace (lag did not grow)'}", flush=True)
        print(f"summary: bulk ratio {bulk:.2f} (goal >= 0.5), single-row drain ratio {single:.2f}")


def grows(live: dict) -> bool:
    """Falling behind: the lag rises by more than a tenth of the WAL written meanwhile."""
    return live["lag_slope"] > 0.1 * max(live["wal_rate"], 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bulk-changes", type=int, default=1_000_000)
    parser.add_argument("--bulk-txn-rows", type=int, default=1000)
    parser.add_argument("--single-txns", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--max-batch-changes", type=int, default=1000)
    parser.add_argument("--live-rates", type=float, nargs="*", default=[0, 5000],
                        help="offered single-row transaction rates for the live runs (0: as fast as pgbench can)")
    parser.add_argument("--quick", action="store_true", help="100k bulk changes and 10k single-row transactions")
    args = parser.parse_args()
    if args.quick:
        args.bulk_changes, args.single_txns = 100_000, 10_000
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
