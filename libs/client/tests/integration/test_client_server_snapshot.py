"""LaredoClient bootstrapped from the fan-out server's stored snapshot (bootstrap_from_server_snapshot): the rows
come from FetchSnapshot, the Sync stream brings only the changes after it; without usable snapshots, a full one."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from laredo_testing.eventually import eventually

from laredo_client import BackoffPolicy, Filter, LaredoClient
from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError
from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part, new_snapshot_id
from laredo_core.snapshots.local_store import LocalSnapshotStore
from laredo_core.stream import naming
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.main import FanoutApp, build
from services.fanout.tests.fanout_testkit import SOURCE, TABLE, Batches, delete, insert, row, update

pytestmark = pytest.mark.integration


class Server:
    """One fan-out instance on a JetStream stream of its own, with a local snapshot store."""

    def __init__(self, js: Any, prefix: str, app: FanoutApp, store: LocalSnapshotStore) -> None:
        self.js, self.prefix, self.app, self.store = js, prefix, app, store
        self.batches = Batches()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.app.grpc_port}"

    @property
    def replica(self) -> TableReplica:
        return self.app.targets.replicas[0]

    async def publish(self, *messages: bytes | list[bytes]) -> None:
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                await self.js.publish(naming.table_subject(self.prefix, SOURCE, TABLE), data)

    async def snapshot_service_snapshot(self) -> SnapshotManifest:
        """What the snapshot service writes of the table as the instance holds it now (journal sequence 0)."""
        replica, created = self.replica, 1_700_000_000.0
        rows = [replica.state.values_of(r) for r in replica.state.rows()]
        snapshot_id, checksum, parts = new_snapshot_id(created, 0, secrets.token_hex(3)), Checksum(), []
        for index, start in enumerate(range(0, len(rows), 16)):
            part, data = encode_part(index, rows[start:start + 16])
            checksum.update(data)
            await self.store.write_part(TABLE, snapshot_id, part.name, data)
            parts.append(part)
        manifest = SnapshotManifest(snapshot_id, TABLE, replica.columns, replica.state.key_columns, len(rows),
                                    str(replica.applied_position), replica.stream_sequence, 0, created, tuple(parts),
                                    checksum.value, source_id=SOURCE, producer="laredo-snapshot")
        await self.store.write_manifest(manifest)
        return manifest


def write_config(path: Path, nats_url: str, prefix: str, snapshots: Path | None) -> Path:
    store = "" if snapshots is None else (f'snapshot {{ interval = 0, store = local, '
                                          f'store_config {{ path = "{snapshots}" }}, restore_on_start = false }}')
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{
  type = replication-fanout, heartbeat_interval = 200ms
  {store}
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0 }}
""")
    return path


@pytest.fixture(params=["with store", "without store"])
async def server(request: pytest.FixtureRequest, nats_url: str, unique_name: str,
                 tmp_path: Path) -> AsyncIterator[Server]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = naming.stream_name(unique_name, SOURCE)
    await js.add_stream(name=stream, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    snapshots = tmp_path / "snapshots" if request.param == "with store" else None
    app = build(load_settings(write_config(tmp_path / "laredo.conf", nats_url, unique_name, snapshots), env={}))
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await eventually(lambda: app.started.is_set() or task.done(), what="the fan-out instance to start")
        yield Server(js, unique_name, app, LocalSnapshotStore(str(snapshots or tmp_path / "unused")))
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await js.delete_stream(stream)
        await nc.close()


def bootstrapping_client(address: str) -> LaredoClient:
    return LaredoClient(address, TABLE.schema, TABLE.name, lookup_fields=("name",), client_id="new-app",
                        backoff=BackoffPolicy(initial=0.05, maximum=0.5), heartbeat_timeout=5,
                        bootstrap_from_server_snapshot=True)


async def test_a_new_client_bootstraps_from_the_servers_stored_snapshot(server: Server) -> None:
    model = {i: row(i) for i in range(1, 41)}
    await server.publish(server.batches.baseline(list(model.values()), chunk_rows=16))
    await eventually(lambda: server.replica.ready and server.replica.journal.current_sequence == 40,
                     what="the instance loaded the baseline")
    manifest = await server.snapshot_service_snapshot()
    await server.publish(server.batches.transaction(insert(row(50)), update(row(3, "three"))),
                         server.batches.transaction(delete({"id": 4})))
    model[50], model[3] = row(50), row(3, "three")
    del model[4]
    await eventually(lambda: server.replica.journal.current_sequence == 43, what="the instance applied the tail")

    client = bootstrapping_client(server.address)
    await client.start()
    try:
        await client.await_ready(15)
        await eventually(lambda: sorted(client.all(), key=lambda r: r["id"]) == list(model.values()),
                         what="the client equals the table")
        if server.app.targets.snapshots:
            assert client.stats.server_snapshot_id == client.snapshot_id == manifest.snapshot_id
            assert client.stats.full_snapshots == 0 and client.stats.modes in (["DELTA"], ["DELTA_FROM_SNAPSHOT"])
            assert client.stats.entries_applied == 3, "only the changes after the snapshot travelled by Sync"
        else:
            assert client.stats.server_snapshot_id == "" and client.stats.modes == ["FULL_SNAPSHOT"]
        assert client.lookup("three")["id"] == 3 and isinstance(client.get(50)["id"], int)
        await server.publish(server.batches.transaction(update(row(50, "fifty"))))
        await eventually(lambda: client.get(50) == row(50, "fifty"), what="live changes after the bootstrap")
    finally:
        await client.stop()


def test_the_option_refuses_filters() -> None:
    with pytest.raises(ConfigError) as refused:
        LaredoClient("fanout:4002", "public", "items", filters=[Filter.equals("name", "x")],
                     bootstrap_from_server_snapshot=True)
    assert "bootstrap_from_server_snapshot: cannot be combined with filters" in str(refused.value)
