"""Query service figures: Lookup requests/s and latency (p50/p99) against an indexed table of --rows rows.

Runs on throwaway PostgreSQL and NATS servers with `laredo-ingest` and `laredo-query` as processes:
  1. a table of --rows rows (id bigint primary key, email text unique, status text, qty int, note text);
  2. ingest baselines it into JetStream; the query service loads it into an indexed-memory target
     (lookup_fields = [email], a non-unique index on status) and reports ready: load time and RSS;
  3. for each --load CLIENTSxINFLIGHT (default 4x8, then 1x1), a load generator in its own process
     (--client-processes of them) runs CLIENTS asyncio gRPC clients (one channel each), each with INFLIGHT
     concurrent Lookup calls on random emails, for --duration seconds after a --warmup; every Lookup must
     find its row. Reported: requests/s, p50/p90/p99/max latency, the query process's CPU per Lookup;
  4. the floor under those figures: the same load against a bare grpc.aio server answering only the standard
     grpc.health.v1.Health/Check (no Laredo code, no front door): the CPU any grpcio unary call costs here;
  5. in-process (bench/query_memory.py): bytes per row with one unique index, and the load of the same rows
     from a snapshot.
Usage: .venv/bin/python bench/query.py [--rows 1000000] [--duration 15] [--load 4x8 --load 1x1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laredo.v1 import query_pb2 as pb  # noqa: E402
from laredo.v1 import query_pb2_grpc  # noqa: E402
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer  # noqa: E402
from bench.query_memory import report as report_memory  # noqa: E402
from tests.e2e.harness import ServiceProcess, free_port  # noqa: E402

TABLE = "public.bench_items"


def write_config(path: Path, *, dsn: str, nats_url: str, query_port: int, health: dict[str, int]) -> Path:
    path.write_text(f"""
sources {{ bench {{ type = postgresql, connection = {json.dumps(dsn)}, slot_name = laredo_bench }} }}
tables = [ {{ source = bench, schema = public, table = bench_items, targets = [ {{
  type = indexed-memory, lookup_fields = [email], indexes = [ {{ name = by_status, fields = [status] }} ] }} ] }} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = laredo }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]} }}
query {{ grpc {{ host = 127.0.0.1, port = {query_port} }}, health_host = 127.0.0.1, health_port = {health["query"]} }}
""")
    return path


def create_table(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, email text NOT NULL UNIQUE, status text, "
                     "qty int, note text)")
        conn.execute(f"INSERT INTO {TABLE} SELECT g, 'user' || g || '@example.com', "
                     "(ARRAY['new', 'paid', 'shipped', 'void'])[g %% 4 + 1], g %% 1000, md5(g::text) "
                     "FROM generate_series(1, %s::bigint) g", (rows,))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------- load generator (its own process)

async def _client(port: int, rows: int, inflight: int, warmup_end: float, end: float, seed: int,
                  latencies: list[float], misses: list[int], floor: bool) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = query_pb2_grpc.TableSyncQueryStub(channel)
        rnd = random.Random(seed)

        async def check() -> None:  # the floor: grpcio's own unary call
            call, request = health_pb2_grpc.HealthStub(channel).Check, health_pb2.HealthCheckRequest()
            while (now := time.perf_counter()) < end:
                await call(request)
                if now >= warmup_end:
                    latencies.append(time.perf_counter() - now)

        async def worker() -> None:
            request = pb.LookupRequest(schema="public", table="bench_items")
            key = request.key_values.add()
            while (now := time.perf_counter()) < end:
                wanted = rnd.randint(1, rows)
                key.string_value = f"user{wanted}@example.com"
                response = await stub.Lookup(request)
                done = time.perf_counter()
                if not response.found or response.row.fields["id"].number_value != wanted:
                    misses.append(wanted)
                if now >= warmup_end:
                    latencies.append(done - now)

        await asyncio.gather(*((check if floor else worker)() for _ in range(inflight)))


async def _generate(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    warmup_end, end = start + args.warmup, start + args.warmup + args.duration
    latencies: list[float] = []
    misses: list[int] = []
    await asyncio.gather(*(_client(args.port, args.rows, args.inflight, warmup_end, end, args.seed * 100 + i,
                                   latencies, misses, args.floor) for i in range(args.clients)))
    print(json.dumps({"latencies": latencies, "misses": len(misses), "seconds": args.duration}))


async def _serve_floor(port: int) -> None:
    """A bare grpc.aio server with the standard health service only: what any grpcio unary call costs."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("serving", flush=True)
    await server.wait_for_termination()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_load(port: int, clients: int, inflight: int, args: argparse.Namespace,
             floor: bool = False) -> tuple[list[float], int]:
    command = [sys.executable, __file__, "--generate", "--port", str(port), "--rows", str(args.rows),
               "--clients", str(clients), "--inflight", str(inflight), "--duration", str(args.duration),
               "--warmup", str(args.warmup), *(["--floor"] if floor else [])]
    procs = [subprocess.Popen([*command, "--seed", str(i + 1)], stdout=subprocess.PIPE, text=True)
             for i in range(args.client_processes)]
    latencies: list[float] = []
    misses = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=args.warmup + args.duration + 120)
        if proc.returncode != 0:
            raise SystemExit(f"load generator failed with exit code {proc.returncode}")
        result = json.loads(out)
        latencies.extend(result["latencies"])
        misses += result["misses"]
    return latencies, misses


# ---------------------------------------------------------------- orchestration

async def run(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-bench-query-"))
    run_dir.chmod(0o755)
    with PostgresServer() as pg, NatsServer() as nats_server:
        t0 = time.perf_counter()
        create_table(pg.dsn, args.rows)
        print(f"table of {args.rows:,} rows created in {time.perf_counter() - t0:.1f}s")
        query_port, health = free_port(), {"ingest": free_port(), "query": free_port()}
        config = write_config(run_dir / "laredo.conf", dsn=pg.dsn, nats_url=nats_server.url, query_port=query_port,
                              health=health)
        ingest = ServiceProcess("ingest", config, health["ingest"], run_dir / "ingest.log")
        query = ServiceProcess("query", config, health["query"], run_dir / "query.log")
        try:
            t0 = time.perf_counter()
            ingest.start()
            query.start()
            await asyncio.to_thread(ingest.wait_ready, 900)
            baselined = time.perf_counter() - t0
            await asyncio.to_thread(query.wait_ready, 1800)
            loaded = time.perf_counter() - t0
            assert query.proc is not None
            print(f"ingest baseline published after {baselined:.1f}s; query ready (all rows loaded and indexed) "
                  f"after {loaded:.1f}s = {args.rows / loaded:,.0f} rows/s end to end; query RSS "
                  f"{rss_mib(query.proc.pid):,.0f} MiB")
            await check_count(query_port, args.rows)
            lookups = {load: await measure(query.proc.pid, query_port, load, args) for load in args.load}
        finally:
            query.stop()
            ingest.stop()
    for load, lookup in lookups.items():
        await measure_floor(load, lookup, args)
    report_memory(args.rows)  # in-process, once the services are gone


async def measure(server_pid: int, port: int, load: str, args: argparse.Namespace, floor: bool = False) -> float:
    """Run one load (CLIENTSxINFLIGHT) and print its figures; the server's CPU seconds per request."""
    clients, inflight = (int(n) for n in load.lower().split("x"))
    cpu_before = cpu_seconds(server_pid)
    latencies, misses = await asyncio.to_thread(run_load, port, clients, inflight, args, floor)
    requests = len(latencies) / args.duration
    cpu_per_request = (cpu_seconds(server_pid) - cpu_before) / (args.warmup + args.duration) / max(requests, 1)
    ms = [x * 1000 for x in latencies]
    what = "Health/Check on a bare grpc.aio server" if floor else "Lookup (unique index, random keys)"
    print(f"{what}, {args.client_processes} load process(es) x {clients} clients x {inflight} in flight, "
          f"{args.duration:.0f}s: {requests:,.0f} requests/s; latency p50 {pct(ms, 50):.2f} ms, "
          f"p90 {pct(ms, 90):.2f} ms, p99 {pct(ms, 99):.2f} ms, max {max(ms):.2f} ms; server CPU "
          f"~{cpu_per_request * 1e6:.0f} us per call" + ("" if floor else f"; misses {misses}"))
    return cpu_per_request


async def measure_floor(load: str, lookup: float, args: argparse.Namespace) -> None:
    """The same load against a bare grpcio server: the part of Lookup's CPU that is grpcio's own per call."""
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve-floor", "--port", str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "serving":
            raise SystemExit(f"the bare grpcio server did not start (exit code {server.wait()})")
        floor = await measure(server.pid, port, load, args, floor=True)
    finally:
        server.terminate()
        server.wait()
    print(f"  -> of Lookup's {lookup * 1e6:.0f} us of CPU per call at {load}, grpcio's own unary call takes "
          f"{floor * 1e6:.0f} us ({floor / lookup:.0%}); the query service's code the rest, "
          f"{(lookup - floor) * 1e6:.0f} us (goal: 70 us in all)")


async def check_count(port: int, rows: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        count = (await query_pb2_grpc.TableSyncQueryStub(channel).CountRows(
            pb.CountRowsRequest(schema="public", table="bench_items"))).count
    if count != rows:
        raise SystemExit(f"the query service holds {count:,} rows, expected {rows:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=15.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--load", action="append", metavar="CLIENTSxINFLIGHT",
                        help="asyncio gRPC clients (one channel each) per load process x concurrent Lookup calls "
                             "per client; repeatable (default: 4x8, then 1x1)")
    parser.add_argument("--clients", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--inflight", type=int, default=8, help=argparse.SUPPRESS)
    parser.add_argument("--client-processes", type=int, default=1)
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.load = args.load or ["4x8", "1x1"]
    asyncio.run(_generate(args) if args.generate else _serve_floor(args.port) if args.serve_floor else run(args))


if __name__ == "__main__":
    main()
