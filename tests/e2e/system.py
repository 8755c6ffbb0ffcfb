"""A whole Laredo system as processes, for end-to-end tests of operations through OAM.

ingest, fan-out, query and OAM run on one table of a throwaway PostgreSQL, NATS and Redis (the test run's
shared Redis, or one of the system's own that a test may stop and start). Helpers compare what consumers hold
with the table: the client library users run (LaredoClient, checked for failures, sequence gaps and ended
streams) and the query service's ListRows, against SELECT *.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
from google.protobuf.json_format import MessageToDict

from laredo.v1 import oam_pb2_grpc, query_pb2, query_pb2_grpc
from laredo_client import LaredoClient
from laredo_kernel.changes import TableId
from laredo_kernel.jsonvalue import row_to_json
from laredo_testing.servers import RedisServer

from tests.e2e.harness import ServiceProcess, free_port, mixed_changes

__all__ = ["SERVICES", "SOURCE", "ChangeWriter", "LibraryReplica", "System", "SystemConfig", "connected_replica",
           "everyone_equals_the_table", "query_rows", "running_system", "table_rows"]

SOURCE = "pg"
SERVICES = ("ingest", "fanout", "query", "oam")
COLUMNS = "id, name, qty, note, updated_at"  # harness.create_table's columns


@dataclass
class System:
    dsn: str
    nats_url: str
    prefix: str
    table: TableId
    ports: dict[str, int]
    services: dict[str, ServiceProcess]
    redis: RedisServer | None = None  # the system's own Redis, when it has one

    def pipeline(self, target_type: str) -> str:
        return f"{SOURCE}:{self.table}:{target_type}"

    def channel(self, service: str) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(f"127.0.0.1:{self.ports[service]}")

    async def oam(self, rpc: str, request: Any) -> Any:
        async with self.channel("oam") as channel:
            return await getattr(oam_pb2_grpc.TableSyncOAMStub(channel), rpc)(request)

    async def query(self, rpc: str, request: Any) -> Any:
        async with self.channel("query") as channel:
            return await getattr(query_pb2_grpc.TableSyncQueryStub(channel), rpc)(request)

    def sql(self, statement: str, params: Any = None) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement, params)

    def assert_running(self) -> None:
        for service in self.services.values():
            service.assert_running()


@dataclass(frozen=True)
class SystemConfig:
    """What differs between systems: HOCON fields (comma-separated) added to the source, the stream and ingest
    sections and each target."""

    source: str = ""
    stream: str = ""
    ingest: str = ""
    fanout_target: str = ""
    query_target: str = ""
    sections: str = ""  # whole sections added at the end (auth { ... })


def write_config(path: Path, *, dsn: str, nats_url: str, redis_url: str, prefix: str, table: TableId,
                 ports: dict[str, int], health: dict[str, int], extra: SystemConfig) -> Path:
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = {json.dumps(dsn)}, slot_name = slot_{prefix},
  status_interval = 1s{_more(extra.source)} }} }}
tables = [ {{ source = {SOURCE}, schema = {table.schema}, table = {table.name}, targets = [
  {{ type = replication-fanout, heartbeat_interval = 1s{_more(extra.fanout_target)} }},
  {{ type = indexed-memory{_more(extra.query_target)} }} ] }} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {prefix}{_more(extra.stream)} }}
redis {{ url = {json.dumps(redis_url)}, key_prefix = {prefix} }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]}, heartbeat_interval = 1s{_more(extra.ingest)} }}
fanout {{ grpc {{ host = 127.0.0.1, port = {ports["fanout"]} }}, health_host = 127.0.0.1,
  health_port = {health["fanout"]}, status_interval = 1s }}
query {{ grpc {{ host = 127.0.0.1, port = {ports["query"]} }}, health_host = 127.0.0.1,
  health_port = {health["query"]}, status_interval = 1s }}
oam {{ grpc {{ host = 127.0.0.1, port = {ports["oam"]} }}, health_host = 127.0.0.1,
  health_port = {health["oam"]}, command_timeout = 15s }}
{extra.sections}
""")
    return path


def _more(fields: str) -> str:
    return f", {fields}" if fields else ""


@contextmanager
def running_system(pg_dsn: str, nats_url: str, prefix: str, table: TableId, tmp_path: Path, *,
                   redis_url: str | None = None, config: SystemConfig = SystemConfig()) -> Iterator[System]:
    """The four services, started and ready, on an existing `table`; without `redis_url` on a Redis of its own
    (System.redis). Afterwards they are stopped and the replication slot is dropped."""
    redis: RedisServer | None = None
    if redis_url is None:
        (tmp_path / "redis").mkdir()
        redis = RedisServer(tmp_path / "redis")
        redis.start()
        redis_url = redis.url
    ports = {n: free_port() for n in ("fanout", "query", "oam")}
    health = {n: free_port() for n in SERVICES}
    path = write_config(tmp_path / "laredo.conf", dsn=pg_dsn, nats_url=nats_url, redis_url=redis_url,
                        prefix=prefix, table=table, ports=ports, health=health, extra=config)
    services = {n: ServiceProcess(n, path, health[n], tmp_path / f"{n}.log") for n in SERVICES}
    try:
        for service in services.values():
            service.start()
        for service in services.values():
            service.wait_ready(90)
        yield System(pg_dsn, nats_url, prefix, table, ports, services, redis)
    finally:
        for service in reversed(services.values()):
            service.stop()
        if redis is not None:
            redis.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{prefix}",))


class LibraryReplica:
    """The table as the client library users run (LaredoClient) holds it. Every read also checks what the tests
    ask of the stream: the client has not failed, saw no sequence gap, and (unless `reconnects`) still reads the
    stream it opened first."""

    def __init__(self, client: LaredoClient, *, reconnects: bool = False) -> None:
        self.client, self._reconnects = client, reconnects

    def rows(self) -> dict[int, dict[str, Any]]:
        self.check()
        return {int(row["id"]): row for row in self.client.all()}

    def check(self) -> None:
        client, stats = self.client, self.client.stats
        assert client.failure is None, f"the client failed: {client.failure}"
        assert stats.sequence_gaps == 0, f"the client saw {stats.sequence_gaps} sequence gap(s): {stats}"
        assert self._reconnects or stats.streams_opened == 1, f"the client's first stream ended: {stats}"


@asynccontextmanager
async def connected_replica(system: System, client_id: str, *,
                            reconnects: bool = False) -> AsyncIterator[LibraryReplica]:
    """A client of the table through the fan-out, ready (snapshot received)."""
    async with LaredoClient(f"127.0.0.1:{system.ports['fanout']}", system.table.schema, system.table.name,
                            client_id=client_id) as client:
        await client.await_ready(60)
        yield LibraryReplica(client, reconnects=reconnects)


def table_rows(dsn: str, table: TableId) -> dict[int, dict[str, Any]]:
    """SELECT * with values as clients see them, keyed by id."""
    with psycopg.connect(dsn, options="-c TimeZone=UTC") as conn:
        cur = conn.execute(f"SELECT {COLUMNS} FROM {table}")
        names = [d.name for d in cur.description]
        return {r[0]: row_to_json(dict(zip(names, r))) for r in cur.fetchall()}


def as_struct_values(row: dict[str, Any]) -> dict[str, Any]:
    """A row as it comes back through google.protobuf.Struct: every number is a double."""
    return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in row.items()}


async def query_rows(system: System) -> dict[int, dict[str, Any]]:
    """Every row the query service holds (ListRows, page by page), keyed by id."""
    async with system.channel("query") as channel:
        return await listed_rows(channel, system.table)


async def listed_rows(channel: grpc.aio.Channel, table: TableId,
                      metadata: tuple[tuple[str, str], ...] = ()) -> dict[int, dict[str, Any]]:
    """Every row a Query service answers for `table` on `channel` (ListRows, page by page), keyed by id."""
    rows: dict[int, dict[str, Any]] = {}
    stub, token = query_pb2_grpc.TableSyncQueryStub(channel), ""
    while True:
        page = await stub.ListRows(query_pb2.ListRowsRequest(schema=table.schema, table=table.name, page_size=1000,
                                                             page_token=token), metadata=metadata)
        rows.update((int(v["id"]), v) for v in map(MessageToDict, page.rows))
        token = page.next_page_token
        if not token:
            return rows


async def everyone_equals_the_table(system: System, rep: LibraryReplica) -> bool:
    """Whether the fan-out client and the query service both hold exactly the table's rows (services alive)."""
    system.assert_running()
    expected = await asyncio.to_thread(table_rows, system.dsn, system.table)
    if rep.rows() != expected:
        return False
    return await query_rows(system) == {k: as_struct_values(v) for k, v in expected.items()}


class ChangeWriter:
    """Mixed inserts, updates and deletes at `rate` changes/s in transactions of 10, from a thread, until left."""

    def __init__(self, dsn: str, table: TableId, rate: float, first_id: int, seed: int = 11) -> None:
        self._dsn, self._table, self._rate, self._next_id = dsn, str(table), rate, first_id
        self._rnd = random.Random(seed)
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
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                live = [r[0] for r in conn.execute(f"SELECT id FROM {self._table}")]
                started = time.monotonic()
                while not self._stop.is_set():
                    with conn.transaction():
                        self._next_id = mixed_changes(conn, self._table, self._rnd, live, self._next_id, 10,
                                                      min_rows=100)
                    self.changes += 10
                    ahead = self.changes / self._rate - (time.monotonic() - started)
                    if ahead > 0:
                        self._stop.wait(ahead)
        except BaseException as exc:  # noqa: BLE001 - reported by __exit__
            self.error = exc
