"""The three services as their composition roots build them, each behind its own front door (Envoy).

Backends are in-memory (change feed, coordination store, snapshot and dead-letter stores) so a test drives the
data: `publish` feeds changes to fan-out and query, `store` takes heartbeats for OAM's status and WatchStatus.
Every port is the real one: Envoy started and supervised by the service, grpcio behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.config import load_settings
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.snapshots.memory_store import MemorySnapshotStore
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_testing import stream
from laredo_testing.protocols import PROTOCOLS

from laredo_oam.adapters.memory import InMemoryCoordinationStore, MemoryChangeTail

TABLE = TableId("public", "items")
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("email", 25, "text"),
    ColumnInfo("status", 25, "text"),
)
SOURCES = f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
"""
START_TIMEOUT = 20.0
STREAMING = tuple(p for p in PROTOCOLS if p != "connect-get-json")  # GET is for unary calls only


def over(service_names: tuple[str, ...], protocols: tuple[str, ...] = PROTOCOLS) -> pytest.MarkDecorator:
    """Parametrize a test by (protocol, service): every protocol under each service name."""
    return pytest.mark.parametrize(("protocol", "service"),
                                   [(p, s) for p in protocols for s in service_names])


@dataclass
class Batches(stream.Batches):
    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS


def row(i: int, status: str = "new") -> dict[str, Any]:
    return {"id": i, "email": f"u{i}@example.com", "status": status}


@dataclass
class Running:
    """A started service: `address` is its front door (host:port)."""

    app: Any
    address: str
    feed: MemoryChangeFeed | None = None
    store: InMemoryCoordinationStore | None = None
    batches: Batches | None = None

    def publish(self, *messages: bytes | list[bytes]) -> None:
        assert self.feed is not None, "this service reads no change feed"
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                self.feed.publish(TABLE, data)


@contextlib.asynccontextmanager
async def serving(app: Any, **extra: Any) -> AsyncIterator[Running]:
    """Run `app` until the block ends; its front door must answer within START_TIMEOUT."""
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    started = asyncio.create_task(app.started.wait())
    await asyncio.wait({task, started}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # start-up failed: its error here
    assert started.done(), f"{type(app).__name__} did not start within {START_TIMEOUT:.0f}s"
    try:
        yield Running(app, f"127.0.0.1:{app.grpc_port}", **extra)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def write_config(directory: Path, body: str, front_door: str = "", extra: str = "") -> Path:
    """The configuration file; `extra` adds top-level sections (tls { }, auth { })."""
    path = directory / "laredo.conf"
    path.write_text(f"{SOURCES}\n{body}\nfront_door {{ {front_door} }}\n{extra}\n")
    return path


OAM_TABLES = """
tables = [ { source = pg, schema = public, table = items, targets = [
  { type = replication-fanout, snapshot { interval = 0s, store = local, store_config { path = /unused } } },
  { type = indexed-memory, lookup_fields = [email] } ] } ]
oam { command_timeout = 5s }
"""


@contextlib.asynccontextmanager
async def oam(directory: Path, front_door: str = "", extra: str = "") -> AsyncIterator[Running]:
    from laredo_oam.main import build

    store = InMemoryCoordinationStore()
    app = build(load_settings(write_config(directory, OAM_TABLES, front_door, extra), env={}), store=store,
                change_tail=MemoryChangeTail(), snapshot_store=MemorySnapshotStore(),
                dead_letter_store=InMemoryDeadLetterStore(), grpc_host="127.0.0.1", grpc_port=0,
                health_host="127.0.0.1", health_port=0)
    async with serving(app, store=store) as running:
        yield running


QUERY_TABLES = """
tables = [ { source = pg, schema = public, table = items, targets = [ {
  type = indexed-memory, lookup_fields = [email], indexes = [ { name = by_status, fields = [status] } ] } ] } ]
query { subscriber_buffer = 256 }
"""


@contextlib.asynccontextmanager
async def query(directory: Path, front_door: str = "", extra: str = "") -> AsyncIterator[Running]:
    from laredo_query.main import build

    feed = MemoryChangeFeed(json_values=True)
    app = build(load_settings(write_config(directory, QUERY_TABLES, front_door, extra), env={}), feed=feed,
                grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0, drain_grace=0.2)
    async with serving(app, feed=feed, batches=Batches()) as running:
        yield running


FANOUT_TABLES = """
tables = [ { source = pg, schema = public, table = items, targets = [ {
  type = replication-fanout
  journal { max_entries = 1000, max_age = 1h }
  heartbeat_interval = 200ms
  snapshot { interval = 0s, store = local, store_config { path = /unused } }
} ] } ]
fanout { grpc { host = 127.0.0.1, port = 0 }, health_host = 127.0.0.1, health_port = 0, drain_grace = 100ms }
telemetry { exporter = none }
"""


@contextlib.asynccontextmanager
async def fanout(directory: Path, front_door: str = "", extra: str = "") -> AsyncIterator[Running]:
    from laredo_fanout.main import build

    feed = MemoryChangeFeed(json_values=True)
    app = build(load_settings(write_config(directory, FANOUT_TABLES, front_door, extra), env={}), feed=feed,
                snapshot_store=MemorySnapshotStore())
    async with serving(app, feed=feed, batches=Batches()) as running:
        yield running
