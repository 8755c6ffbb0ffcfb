"""A deployment for the OAM snapshot tests: JetStream stream, a laredo-fanout process with snapshot stores (S3 and
local), Redis, and the OAM app in this process, all from one configuration file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from laredo.v1 import oam_pb2_grpc
from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.config import load_settings
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_core.stream import naming
from laredo_testing.eventually import eventually
from laredo_testing.process import free_port
from laredo_testing.servers import S3Endpoint
from laredo_testing.stream import Batches

from laredo_oam.main import App, build
from tests.e2e.harness import ServiceProcess

SOURCE = "pg"
ITEMS, ORDERS, AUDIT = TableId("public", "items"), TableId("public", "orders"), TableId("public", "audit")
COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           ColumnInfo("name", 25, "text"))
S3_PREFIX = "oam/snaps"


def config_text(*, nats_url: str, redis_url: str, prefix: str, s3: S3Endpoint, bucket: str, local_path: Path,
                health_port: int, instance_id: str) -> str:
    """items: S3 store; orders: local store; audit: no snapshot store. No count retention (prune is tested)."""
    s3_config = (f'bucket = {json.dumps(bucket)}, prefix = "{S3_PREFIX}", endpoint = {json.dumps(s3.url)}, '
                 f"access_key = {json.dumps(s3.access_key)}, secret_key = {json.dumps(s3.secret_key)}, "
                 f"region = {json.dumps(s3.region)}")
    snapshot = "interval = 0s, restore_on_start = false, retention { keep_count = 0 }"
    return f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [
  {{ source = {SOURCE}, table = items, targets = [ {{ type = replication-fanout,
      snapshot {{ {snapshot}, store = s3, store_config {{ {s3_config} }} }} }} ] }}
  {{ source = {SOURCE}, table = orders, targets = [ {{ type = replication-fanout,
      snapshot {{ {snapshot}, store = local, store_config {{ path = {json.dumps(str(local_path))} }} }} }} ] }}
  {{ source = {SOURCE}, table = audit, targets = [ {{ type = replication-fanout }} ] }}
]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {prefix} }}
redis {{ url = {json.dumps(redis_url)}, key_prefix = {prefix} }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = {health_port},
          instance_id = {instance_id}, status_interval = 200ms }}
oam {{ command_timeout = 20s }}
"""


@dataclass
class Deployment:
    oam: App
    stub: oam_pb2_grpc.TableSyncOAMStub
    fanout: ServiceProcess
    coordination: RedisCoordinationStore
    js: Any
    prefix: str
    batches: dict[TableId, Batches]
    instance_id: str

    async def publish(self, table: TableId, *messages: bytes | list[bytes]) -> None:
        await publish(self.js, self.prefix, table, *messages)

    async def wait_rows(self, table: TableId, count: int) -> None:
        await wait_rows(self.coordination, self.instance_id, table, count)


async def publish(js: Any, prefix: str, table: TableId, *messages: bytes | list[bytes]) -> None:
    subject = naming.table_subject(prefix, SOURCE, table)
    for message in messages:
        for data in message if isinstance(message, list) else [message]:
            await js.publish(subject, data)


async def wait_rows(coordination: RedisCoordinationStore, instance_id: str, table: TableId, count: int) -> None:
    """Until the fan-out instance reports `count` rows of the table, ready, in its heartbeat."""

    async def reported() -> bool:
        for instance in await coordination.instances("fanout"):
            entry = instance.status.get("tables", {}).get(str(table), {})
            if instance.instance_id == instance_id and entry.get("rows") == count and entry.get("ready"):
                return True
        return False

    await eventually(reported, timeout=30, interval=0.1, what=f"fan-out to report {count} rows of {table}")


def rows(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"row {i}"} for i in range(first, first + count)]


@asynccontextmanager
async def deployment(tmp_path: Path, *, nats_url: str, redis_url: str, s3: S3Endpoint, prefix: str,
                     baseline_rows: dict[TableId, int]) -> AsyncIterator[Deployment]:
    """Baselines published first, then fan-out started (and ready), then OAM started."""
    import nats

    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = naming.stream_name(prefix, SOURCE)
    await js.add_stream(name=stream, subjects=[naming.source_subject_filter(prefix, SOURCE)])
    instance_id = f"fanout-{prefix}"
    health_port = free_port()
    path = tmp_path / "laredo.conf"
    path.write_text(config_text(nats_url=nats_url, redis_url=redis_url, prefix=prefix, s3=s3, bucket=prefix,
                                local_path=tmp_path / "local-snapshots", health_port=health_port,
                                instance_id=instance_id))
    fanout = ServiceProcess("fanout", path, health_port, tmp_path / "fanout.log")
    coordination = RedisCoordinationStore(redis_url, prefix)
    batches = {t: Batches(t, COLUMNS) for t in (ITEMS, ORDERS, AUDIT)}
    oam: App | None = None
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    channel: grpc.aio.Channel | None = None
    try:
        for table, count in baseline_rows.items():
            await publish(js, prefix, table, batches[table].baseline(rows(1, count)))
        fanout.start()
        await asyncio.to_thread(fanout.wait_ready, 60)
        for table, count in baseline_rows.items():
            await wait_rows(coordination, instance_id, table, count)
        oam = build(load_settings(path, env={}), grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1",
                    health_port=0)
        task = asyncio.create_task(oam.run(stop))
        await asyncio.wait_for(oam.started.wait(), 10)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{oam.grpc_port}")
        yield Deployment(oam, oam_pb2_grpc.TableSyncOAMStub(channel), fanout, coordination, js, prefix, batches,
                         instance_id)
    finally:
        if channel is not None:
            await channel.close()
        stop.set()
        if task is not None:
            await asyncio.wait_for(task, 10)
        await asyncio.to_thread(fanout.stop)
        await coordination.aclose()
        await js.delete_stream(stream)
        await nc.close()
