"""The whole Laredo system on this machine, no Docker, and a short tour of it (scripts/demo --full).

Starts a throwaway PostgreSQL (wal_level=logical), NATS JetStream, Redis and an S3 endpoint (moto), then ingest,
two fan-outs, query, OAM and the snapshot service (Spark in local mode) as processes on free loopback ports,
with bearer tokens. Prints where everything is, then tours it while a writer changes the table: `laredo
status`, a lookup, a snapshot, a drain of one fan-out with the client library handing over to the other, and
the trace of one change (spans received by a small OTLP/HTTP receiver here). It ends by checking every replica
(the client library's, each fan-out's, query's) against the table. --keep keeps everything running afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import grpc
import psycopg
from aiohttp import web
from google.protobuf.json_format import MessageToDict
from minio import Minio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from laredo.v1 import oam_pb2, oam_pb2_grpc  # noqa: E402
from laredo_client import LaredoClient  # noqa: E402
from laredo_kernel.changes import TableId  # noqa: E402
from laredo_kernel.jsonvalue import row_to_json  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer, RedisServer, S3Server  # noqa: E402
from tests.e2e.harness import ServiceProcess, free_port  # noqa: E402
from tests.e2e.system import as_struct_values, listed_rows  # noqa: E402

TABLE = "public.demo_items"
ADMIN_TOKEN = "demo-admin-token"
BUCKET = "laredo-snapshots"
BIN = Path(sys.executable).parent
TRACED_ID = 900_001


def say(text: str = "") -> None:
    print(text, flush=True)


class TraceReceiver:
    """OTLP/HTTP on a free port: the spans of every service, by trace id (metrics are accepted and dropped)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.spans: dict[bytes, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        with self._lock:
            for resource in export.resource_spans:
                service = next((a.value.string_value for a in resource.resource.attributes
                                if a.key == "service.name"), "?")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans[span.trace_id].append({
                            "service": service, "name": span.name, "id": span.span_id,
                            "parent": span.parent_span_id, "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": {a.key: _value(a.value) for a in span.attributes}})
        return web.Response(content_type="application/x-protobuf", body=b"")

    async def _accepted(self, _: web.Request) -> web.Response:
        return web.Response(content_type="application/x-protobuf", body=b"")

    def start(self) -> None:
        started = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_post("/v1/traces", self._traces)
            app.router.add_post("/v1/metrics", self._accepted)
            runner = web.AppRunner(app, access_log=None)
            self._loop.run_until_complete(runner.setup())
            self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
            started.set()
            self._loop.run_forever()

        threading.Thread(target=serve, name="otlp-receiver", daemon=True).start()
        started.wait(10)

    def latest_trace(self, name: str, key: str, value: str) -> list[dict[str, Any]]:
        """The spans of the newest trace holding a span `name` whose attribute `key` is `value`."""
        with self._lock:
            found = [spans for spans in self.spans.values()
                     if any(s["name"] == name and s["attributes"].get(key) == value for s in spans)]
        newest = max(found, key=lambda spans: max(s["start"] for s in spans), default=[])
        return sorted(newest, key=lambda s: s["start"])


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def write_config(path: Path, *, pg: str, nats: str, redis: str, s3: Any, ports: dict[str, int], health: dict[str, int],
                 otlp_port: int, engine: str, token_file: Path) -> None:
    store = (f'store = s3, store_config {{ endpoint = "{s3.url}", bucket = {BUCKET}, prefix = demo, '
             f'access_key = {s3.access_key}, secret_key = {s3.secret_key} }}')
    path.write_text(f"""
sources {{ demo {{ type = postgresql, connection = {json.dumps(pg)}, slot_name = laredo_demo, status_interval = 1s }} }}
tables = [ {{ source = demo, schema = public, table = demo_items, targets = [
  {{ type = replication-fanout, heartbeat_interval = 1s,
     snapshot {{ interval = 0s, {store}, retention {{ keep_count = 5 }} }} }},
  {{ type = indexed-memory, lookup_fields = [name] }} ] }} ]
stream {{ nats_url = {json.dumps(nats)}, subject_prefix = demo }}
redis {{ url = {json.dumps(redis)}, key_prefix = demo }}
telemetry {{ exporter = otlp, otlp_protocol = http, otlp_endpoint = "http://127.0.0.1:{otlp_port}" }}
auth {{ tokens = [ {{ name = demo-operator, role = admin, file = "{token_file}" }} ] }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]}, heartbeat_interval = 1s }}
fanout {{ grpc {{ host = 127.0.0.1, port = {ports["fanout-a"]} }}, health_host = 127.0.0.1,
  health_port = {health["fanout-a"]}, status_interval = 1s, instance_id = fanout-a }}
query {{ grpc {{ host = 127.0.0.1, port = {ports["query"]} }}, health_host = 127.0.0.1,
  health_port = {health["query"]}, status_interval = 1s }}
oam {{ grpc {{ host = 127.0.0.1, port = {ports["oam"]} }}, health_host = 127.0.0.1,
  health_port = {health["oam"]}, command_timeout = 30s }}
snapshot {{ engine = {engine}, interval = 15s, run_on_start = true, partitions = 2,
  spark {{ master = "local[2]", driver_memory = 1g }}, health_host = 127.0.0.1, health_port = {health["snapshot"]} }}
""")


def writer(dsn: str, stop: threading.Event) -> int:
    """Inserts and updates at a few transactions per second until stopped."""
    written, next_id = 0, 2001
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            if written % 3 == 0:
                conn.execute(f"INSERT INTO {TABLE} (id, name, price) VALUES (%s, %s, %s)",
                             (next_id, f"item {next_id}", next_id % 100))
                next_id += 1
            else:
                conn.execute(f"UPDATE {TABLE} SET price = price + 1 WHERE id = %s", (1 + written % 1000,))
            written += 1
            stop.wait(0.2)
    return written


class Tour:
    def __init__(self, run_dir: Path, pg: str, ports: dict[str, int], health: dict[str, int]) -> None:
        self.run_dir, self.pg, self.ports, self.health = run_dir, pg, ports, health
        self.oam = f"127.0.0.1:{ports['oam']}"
        self.env = {**os.environ, "LAREDO_SERVER": self.oam, "LAREDO_TOKEN_FILE": str(run_dir / "admin.token")}

    def laredo(self, *args: str) -> str:
        """Run the CLI as a user would, print what it prints; a failure ends the tour."""
        say(f"\n$ laredo {' '.join(args)}")
        done = subprocess.run([str(BIN / "laredo"), *args], env=self.env, capture_output=True, text=True,
                              timeout=120)
        say((done.stdout + done.stderr).rstrip())
        if done.returncode != 0:
            raise SystemExit(f"laredo {' '.join(args)} failed with exit code {done.returncode}")
        return done.stdout

    async def instance_of(self, client_id: str, *, other_than: str = "", timeout: float = 30.0) -> str:
        """The fan-out instance (not `other_than`) whose status report lists the client live (ListInstances)."""
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.oam) as channel:
            oam = oam_pb2_grpc.TableSyncOAMStub(channel)
            while time.monotonic() < deadline:
                answer = await oam.ListInstances(oam_pb2.ListInstancesRequest(service="fanout"),
                                                 metadata=[("authorization", f"Bearer {ADMIN_TOKEN}")])
                for instance in answer.instances:
                    tables = MessageToDict(instance.status).get("tables", {})
                    clients = [c for entry in tables.values() for c in entry.get("client_list", [])]
                    if instance.instance_id != other_than and any(
                            c.get("client_id") == client_id and c.get("state") == "live" for c in clients):
                        return instance.instance_id
                await asyncio.sleep(0.5)
        raise SystemExit(f"the tour stopped: no fan-out instance reports client {client_id} within {timeout:g}s")

    def snapshot_passes(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.health['snapshot']}/health/ready", timeout=5) as r:
            return int(json.loads(r.read()).get("passes", 0))

    async def query_rows(self) -> dict[int, dict[str, Any]]:
        """Every row query holds (ListRows through OAM's address), keyed by id."""
        async with grpc.aio.insecure_channel(self.oam) as channel:
            return await listed_rows(channel, TableId.parse(TABLE), (("authorization", f"Bearer {ADMIN_TOKEN}"),))

    def answers_query(self) -> bool:
        """Whether OAM's address answers Query yet (it learns the ready query instances every 2s)."""
        return subprocess.run([str(BIN / "laredo"), "count", TABLE], env=self.env, capture_output=True,
                              timeout=60).returncode == 0

    def table(self) -> dict[int, dict[str, Any]]:
        with psycopg.connect(self.pg, options="-c TimeZone=UTC") as conn:
            cur = conn.execute(f"SELECT * FROM {TABLE}")
            names = [d.name for d in cur.description]
            return {r[0]: row_to_json(dict(zip(names, r))) for r in cur}


async def until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"the tour stopped: {what} did not happen within {timeout:g}s")
        await asyncio.sleep(0.2)


async def tour(t: Tour, receiver: TraceReceiver, keep: bool) -> bool:
    t.laredo("status")
    await until(t.answers_query, "OAM's address answering Query", timeout=30)
    t.laredo("lookup", TABLE, "item 42")
    stop_writing = threading.Event()
    writing = asyncio.create_task(asyncio.to_thread(writer, t.pg, stop_writing))
    try:
        return await _tour(t, receiver, keep, stop_writing, writing)
    finally:
        stop_writing.set()
        await writing


async def _tour(t: Tour, receiver: TraceReceiver, keep: bool, stop_writing: threading.Event,
                writing: asyncio.Task[int]) -> bool:
    fanouts = f"ipv4:127.0.0.1:{t.ports['fanout-a']},127.0.0.1:{t.ports['fanout-b']}"
    async with LaredoClient(fanouts, "public", "demo_items", client_id="demo-tour", token=ADMIN_TOKEN,
                            channel_options=[("grpc.lb_policy_name", "round_robin")]) as client:
        await client.await_ready(60)
        say(f"\nthe client library holds {client.count()} rows and follows the changes the writer makes")
        await asyncio.sleep(3.0)
        say(f"in 3 s it applied {client.stats.entries_applied} changes")
        t.laredo("snapshots", "create", TABLE)
        t.laredo("snapshots", "list")

        serving = await t.instance_of("demo-tour")
        other = "fanout-b" if serving == "fanout-a" else "fanout-a"
        say(f"\nThe client streams from {serving}. Draining it: its clients get a GoAway and move to {other}, "
            "resuming where they were.")
        before = client.stats.handoffs
        t.laredo("drain", "--instance", serving, TABLE)
        await until(lambda: client.stats.handoffs > before, "the client's hand-over")
        say(f"the client moved to {await t.instance_of('demo-tour', other_than=serving)}: "
            f"{client.stats.handoffs} hand-over(s), "
            f"{client.stats.full_resyncs} full resync(s)")

        stop_writing.set()
        written = await writing  # the traced change is the last one: its trace is the newest
        with psycopg.connect(t.pg, autocommit=True) as conn:
            conn.execute(f"INSERT INTO {TABLE} (id, name, price) VALUES (%s, 'traced', 1)", (TRACED_ID,))
        await until(lambda: client.get(TRACED_ID) is not None, "the traced row reaching the client")
        await asyncio.sleep(6.0)  # the services export their spans every few seconds
        spans = receiver.latest_trace("fanout.sync.send", "laredo.client_id", "demo-tour")
        if not spans:
            raise SystemExit("the tour stopped: no trace of the change reached the OTLP receiver")
        say(f"\nThe trace of one change (row {TRACED_ID}, the last one written): {len(spans)} spans (each fan-out "
            "applies it; the one serving the client sends it)")
        first = spans[0]["start"]
        for span in spans:
            say(f"  +{(span['start'] - first) / 1e6:8.2f} ms {(span['end'] - span['start']) / 1e6:7.2f} ms  "
                f"{span['service']:<14} {span['name']}")

        say(f"\nThe writer made {written} transactions. Checking every replica against the table:")
        expected = t.table()
        ok = compare(f"the tour's client (now on {other})", {int(r["id"]): r for r in client.all()}, expected)
    async with LaredoClient(f"127.0.0.1:{t.ports[other]}", "public", "demo_items", token=ADMIN_TOKEN) as fresh:
        await fresh.await_ready(60)
        ok &= compare(f"a new client of {other}", {int(r["id"]): r for r in fresh.all()}, expected)
    say("\nThe snapshot service compacts the newest snapshot and the stream after it into a new snapshot:")
    passes = t.snapshot_passes()
    await until(lambda: t.snapshot_passes() > passes, "the snapshot service's next pass (every 15s)", timeout=300)
    t.laredo("snapshots", "list")
    ok &= compare("query (ListRows through OAM)", await t.query_rows(),
                  {key: as_struct_values(row) for key, row in expected.items()})
    say(f"  ({serving} is drained: it takes no new client)")
    if keep:
        say("\nEverything keeps running; Ctrl-C stops it.")
        await asyncio.Event().wait()
    return ok


def compare(name: str, held: dict[int, Any], expected: dict[int, Any]) -> bool:
    same = held == expected
    say(f"  {name:<36} {len(held):>6} rows  {'equals the table' if same else 'DIFFERS from the table'}")
    return same


@contextmanager
def services(run_dir: Path, config: Path, health: dict[str, int], ports: dict[str, int]) -> Iterator[None]:
    processes = {name: ServiceProcess(name, config, health[name], run_dir / f"{name}.log")
                 for name in ("ingest", "fanout", "query", "oam", "snapshot")}
    second = ServiceProcess("fanout", config, health["fanout-b"], run_dir / "fanout-b.log")
    second.extra_args = ["--set", f"fanout.grpc.port={ports['fanout-b']}", "--set",
                         f"fanout.health_port={health['fanout-b']}", "--set", "fanout.instance_id=fanout-b"]
    started = [*processes.values(), second]
    try:
        for process in started:
            process.start()
        for process in started:
            process.wait_ready(180)
        yield
    finally:
        for process in reversed(started):
            process.stop()


def _stop(signum: int, _: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: every service and server is stopped by its context


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("spark", "sequential"), default="spark",
                        help="the snapshot service's engine (Spark local mode, or the sequential fold)")
    parser.add_argument("--keep", action="store_true", help="keep everything running after the tour")
    args = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-full-"))
    run_dir.chmod(0o755)
    (run_dir / "admin.token").write_text(ADMIN_TOKEN + "\n")
    receiver = TraceReceiver()
    receiver.start()
    with ExitStack() as stack:
        pg = stack.enter_context(PostgresServer())
        nats = stack.enter_context(NatsServer())
        redis = stack.enter_context(RedisServer())
        s3 = stack.enter_context(S3Server()).endpoint
        Minio(s3.endpoint, s3.access_key, s3.secret_key, secure=False, region=s3.region).make_bucket(BUCKET)
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text NOT NULL UNIQUE, price numeric)")
            conn.execute(f"INSERT INTO {TABLE} SELECT g, 'item ' || g, g FROM generate_series(1, 1000) g")
        ports = {name: free_port() for name in ("fanout-a", "fanout-b", "query", "oam")}
        health = {name: free_port() for name in ("ingest", "fanout-a", "fanout-b", "query", "oam", "snapshot")}
        health["fanout"] = health["fanout-a"]
        config = run_dir / "laredo.conf"
        write_config(config, pg=pg.dsn, nats=nats.url, redis=redis.url, s3=s3, ports=ports, health=health,
                     otlp_port=receiver.port, engine=args.engine, token_file=run_dir / "admin.token")
        say(f"starting ingest, two fan-outs, query, OAM and the snapshot service ({args.engine}); logs in {run_dir}")
        stack.enter_context(services(run_dir, config, health, ports))
        print_addresses(run_dir, pg.dsn, nats.url, redis.url, s3.url, ports, health)
        ok = asyncio.run(tour(Tour(run_dir, pg.dsn, ports, health), receiver, args.keep))
    say("\nThe tour passed: every replica equals the table." if ok else "\nThe tour FAILED: a replica differs.")
    return 0 if ok else 1


def print_addresses(run_dir: Path, pg: str, nats: str, redis: str, s3: str, ports: dict[str, int],
                    health: dict[str, int]) -> None:
    oam = f"127.0.0.1:{ports['oam']}"
    say(f"""
Everything is running (configuration: {run_dir / 'laredo.conf'}; admin token: {ADMIN_TOKEN}).
  PostgreSQL   {pg}
  NATS         {nats}      Redis {redis}      S3 (moto) {s3}
  OAM          {oam}   (Connect, gRPC-Web and gRPC; also answers Query)
  web console  http://{oam}/console/   (sign in with the admin token)
  fan-out      127.0.0.1:{ports['fanout-a']} (fanout-a), 127.0.0.1:{ports['fanout-b']} (fanout-b)
  query        127.0.0.1:{ports['query']}
  metrics      {'  '.join(f'{n}: http://127.0.0.1:{p}/metrics' for n, p in health.items() if n != 'fanout')}

  CLI          LAREDO_SERVER={oam} LAREDO_TOKEN={ADMIN_TOKEN} {BIN / 'laredo'} status
  curl         curl -H 'content-type: application/json' -H 'authorization: Bearer {ADMIN_TOKEN}' -d '{{}}' \\
                 http://{oam}/laredo.v1.TableSyncOAM/GetStatus
  grpcurl      grpcurl -plaintext -H 'authorization: Bearer {ADMIN_TOKEN}' {oam} laredo.v1.TableSyncOAM/GetStatus
  client       from laredo_client import LaredoClient
               async with LaredoClient("127.0.0.1:{ports['fanout-b']}", "public", "demo_items",
                                       token="{ADMIN_TOKEN}") as client:
                   await client.await_ready(); print(client.count(), client.get(42))""")


if __name__ == "__main__":
    sys.exit(main())
