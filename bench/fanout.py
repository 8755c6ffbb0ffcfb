"""Fan-out figures: deliveries/s per process, a full-snapshot download next to COPY, latency, memory.

Runs a `laredo-fanout` process on throwaway NATS (and PostgreSQL for the COPY comparison); synthetic
ChangeBatch messages are published to JetStream as ingest would; readers run in a separate process
(bench/fanout_clients.py), so the fan-out process is measured alone:
  1. COPY public.bench_items TO STDOUT of --snapshot-rows rows (rows/s), then the same rows as a baseline;
  2. a fresh client receiving them as a FULL_SNAPSHOT (rows/s, batched --snapshot-batch rows per message);
  3. row-deliveries/s with --clients readers (each: one entry per message, then batched --batch);
  4. publish-to-client latency p50/p99 with --latency-clients readers at --latency-rate changes/s (the commit
     time stamped on each batch is the publish time: JetStream -> fan-out -> client; bench/e2e.py measures
     PostgreSQL -> client);
  5. memory per row of state and per journal entry (tracemalloc, in this process, with the service's code).
Usage: .venv/bin/python bench/fanout.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import nats
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fanout_memory import measure_memory  # noqa: E402
from bench.fanout_stream import COLUMNS, TABLE, baseline_messages, copy_rows, update_transaction  # noqa: E402
from laredo.replication.v1 import replication_pb2 as pb  # noqa: E402
from laredo.replication.v1 import replication_pb2_grpc as pb_grpc  # noqa: E402
from laredo_core.stream.naming import source_subject_filter, stream_name, table_subject  # noqa: E402
from laredo_testing.process import free_port  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer  # noqa: E402

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
SOURCE, PREFIX = "bench", "laredo"


class FanoutProcess:
    """laredo-fanout as a process, with its CPU time and RSS read from /proc."""

    def __init__(self, run_dir: Path, nats_url: str, journal_entries: int) -> None:
        self.grpc_port, self.health_port = free_port(), free_port()
        self.config = run_dir / "fanout.conf"
        self.config.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = public, table = {TABLE}, targets = [ {{
  type = replication-fanout
  journal {{ max_entries = {journal_entries}, max_age = 0 }}
  client_buffer {{ max_size = 100000, policy = slow_down }}
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {PREFIX} }}
fanout {{ grpc {{ host = 127.0.0.1, port = {self.grpc_port} }}, health_host = 127.0.0.1, health_port = {self.health_port} }}
telemetry {{ exporter = none }}
""")
        self.log = (run_dir / "fanout.log").open("wb")
        self.proc = subprocess.Popen([str(BIN / "laredo-fanout"), "--config", str(self.config), "--log-level",
                                      "warning"], stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    async def status(self) -> pb.GetReplicationStatusResponse:
        async with grpc.aio.insecure_channel(self.address) as channel:
            return await pb_grpc.TableSyncReplicationStub(channel).GetReplicationStatus(
                pb.GetReplicationStatusRequest(schema="public", table=TABLE))

    async def wait_sequence(self, sequence: int, timeout: float = 600) -> float:
        """Wait until the journal reached `sequence`; returns when (wall clock)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if (await self.status()).current_sequence >= sequence:
                    return time.time()
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.05)  # a benchmark harness polling the service from outside
        raise TimeoutError(f"fan-out did not reach sequence {sequence}; see {self.log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


class Clients:
    """A bench/fanout_clients.py process."""

    def __init__(self, address: str, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fanout_clients.py"), "--address", address, *args],
                                     stdout=subprocess.PIPE, text=True)

    async def event(self, name: str) -> dict[str, object]:
        assert self.proc.stdout is not None
        line = await asyncio.to_thread(self.proc.stdout.readline)
        if not line:
            raise RuntimeError(f"the client process ended (exit {self.proc.wait()}) before {name!r}")
        data = json.loads(line)
        assert data["event"] == name, data
        return data

    def wait(self) -> None:
        self.proc.wait(60)


async def publish(js: object, messages: list[bytes]) -> None:
    subject = table_subject(PREFIX, SOURCE, _table_id())
    for start in range(0, len(messages), 200):  # pipelined in groups: acks overlap
        await asyncio.gather(*(js.publish(subject, m) for m in messages[start:start + 200]))  # type: ignore


def _table_id():  # noqa: ANN202
    from laredo_core.changes import TableId

    return TableId("public", TABLE)


async def measure_copy(pg: PostgresServer, rows: int) -> float:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{TABLE} (id bigint PRIMARY KEY, name text NOT NULL, qty int, "
                     "updated_at timestamptz)")
        with conn.cursor().copy(f"COPY public.{TABLE} FROM STDIN") as copy:
            for row in copy_rows(rows):
                copy.write_row(row)
        conn.execute(f"VACUUM ANALYZE public.{TABLE}")
        started = time.perf_counter()
        size = 0
        with conn.cursor().copy(f"COPY public.{TABLE} TO STDOUT") as copy:
            for data in copy:
                size += len(data)
        elapsed = time.perf_counter() - started
    print(f"COPY public.{TABLE} TO STDOUT: {rows:,} rows ({size / 1e6:.1f} MB) in {elapsed:.2f}s "
          f"= {rows / elapsed:,.0f} rows/s")
    return rows / elapsed


async def measure_deliveries(server: FanoutProcess, js: object, clients: int, batch: int, changes: int,
                             rows: int) -> None:
    current = (await server.status()).current_sequence
    readers = Clients(server.address, "--clients", str(clients), "--batch", str(batch), "--since", str(current),
                      "--until", str(current + changes))
    await readers.event("live")
    messages = [update_transaction(start, min(1000, changes - start), rows) for start in range(0, changes, 1000)]
    cpu, started = server.cpu_seconds(), time.time()
    await publish(js, messages)
    done = await readers.event("done")
    elapsed, used = float(done["finished_at"]) - started, server.cpu_seconds() - cpu  # type: ignore[arg-type]
    readers.wait()
    shape = f"batched (max_batch_size {batch})" if batch > 1 else "one entry per message"
    print(f"deliveries, {clients} clients, {shape}: {clients * changes:,} row-deliveries in {elapsed:.2f}s = "
          f"{clients * changes / elapsed:,.0f}/s (fan-out CPU {used:.1f}s: {clients * changes / max(used, 1e-6):,.0f} "
          "per CPU-second)")


async def measure_snapshot(server: FanoutProcess, rows: int, batch: int, copy_rate: float) -> None:
    current = (await server.status()).current_sequence
    reader = Clients(server.address, "--clients", "1", "--batch", str(batch), "--since", "0", "--until", str(current))
    await reader.event("live")
    done = await reader.event("done")
    reader.wait()
    seconds = float(done["snapshot_seconds"])  # type: ignore[arg-type]
    print(f"full snapshot to a fresh client: {int(done['rows']):,} rows in {seconds:.2f}s = {rows / seconds:,.0f} "  # type: ignore
          f"rows/s (max_batch_size {batch}); COPY TO STDOUT: {copy_rate:,.0f} rows/s ({rows / seconds / copy_rate:.2f}x)")


async def measure_latency(server: FanoutProcess, js: object, clients: int, batch: int, rate: float, seconds: float,
                          per_transaction: int, rows: int) -> None:
    current = (await server.status()).current_sequence
    total = int(rate * seconds) // per_transaction * per_transaction
    readers = Clients(server.address, "--clients", str(clients), "--batch", str(batch), "--since", str(current),
                      "--until", str(current + total), "--latency")
    await readers.event("live")
    subject = table_subject(PREFIX, SOURCE, _table_id())
    started = time.monotonic()
    for index, start in enumerate(range(0, total, per_transaction)):
        await asyncio.sleep(max(0.0, started + index * per_transaction / rate - time.monotonic()))
        await js.publish(subject, update_transaction(start, per_transaction, rows))  # type: ignore
    done = await readers.event("done")
    readers.wait()
    lat = done["latency_ms"]
    print(f"publish-to-client latency, {clients} clients (max_batch_size {batch}), {rate:,.0f} changes/s as "
          f"{rate / per_transaction:,.0f} txn/s of {per_transaction}: p50 {lat['p50']:.1f} ms, "  # type: ignore[index]
          f"p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms over {lat['count']:,} deliveries")  # type: ignore[index]


async def run(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-bench-fanout-"))
    run_dir.chmod(0o755)
    with PostgresServer() as pg, NatsServer() as nats_server:
        copy_rate = await measure_copy(pg, args.snapshot_rows)
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.add_stream(name=stream_name(PREFIX, SOURCE), subjects=[source_subject_filter(PREFIX, SOURCE)])
        await publish(js, baseline_messages(args.snapshot_rows))
        server = FanoutProcess(run_dir, nats_server.url, journal_entries=max(args.changes_batched, 200_000))
        try:
            started = time.time()
            ready = await server.wait_sequence(args.snapshot_rows)
            print(f"fan-out applied the {args.snapshot_rows:,}-row baseline in {ready - started:.1f}s "
                  f"(= {args.snapshot_rows / (ready - started):,.0f} rows/s, start-up included); process RSS then "
                  f"{server.rss_bytes() / 2**20:,.0f} MiB (rows + the journal's last "
                  f"{min(args.snapshot_rows, max(args.changes_batched, 200_000)):,} baseline entries)")
            if "snapshot" in args.phases:
                await measure_snapshot(server, args.snapshot_rows, args.snapshot_batch, copy_rate)
            for clients in args.clients if "deliveries" in args.phases else ():
                await measure_deliveries(server, js, clients, 0, args.changes_unbatched * 100 // clients,
                                         args.snapshot_rows)
                await measure_deliveries(server, js, clients, args.batch, args.changes_batched, args.snapshot_rows)
            for per_transaction in args.latency_txn_changes if "latency" in args.phases else ():
                await measure_latency(server, js, args.latency_clients, args.latency_batch, args.latency_rate,
                                      args.latency_seconds, per_transaction, args.snapshot_rows)
        finally:
            server.stop()
            await nc.close()
    if "memory" in args.phases:
        measure_memory(args.memory_rows, COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a run of well under a minute")
    parser.add_argument("--snapshot-rows", type=int, default=1_000_000)
    parser.add_argument("--snapshot-batch", type=int, default=1000)
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[100, 500])
    parser.add_argument("--changes-unbatched", type=int, default=2000,
                        help="changes per run with 100 unbatched clients (scaled down for more clients)")
    parser.add_argument("--changes-batched", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500, help="max_batch_size of the batched readers")
    parser.add_argument("--latency-clients", type=int, default=100)
    parser.add_argument("--latency-batch", type=int, default=100)
    parser.add_argument("--latency-rate", type=float, default=1000.0)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--latency-txn-changes", type=lambda s: [int(x) for x in s.split(",")], default=[10, 1])
    parser.add_argument("--memory-rows", type=int, default=100_000)
    parser.add_argument("--phases", type=lambda s: set(s.split(",")), default={"snapshot", "deliveries", "latency",
                                                                              "memory"},
                        help="comma-separated subset of snapshot,deliveries,latency,memory")
    args = parser.parse_args()
    if args.quick:
        args.snapshot_rows, args.clients, args.changes_unbatched = 20_000, [20, 50], 500
        args.changes_batched, args.latency_clients, args.latency_seconds, args.memory_rows = 5000, 20, 3.0, 20_000
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
