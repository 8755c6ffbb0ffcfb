"""LaredoClient against the real fan-out service fed through real NATS JetStream: a client restarted from its
local snapshot catches up by DELTA without a full snapshot, and a GoAway hands a live client to another
instance (behind a test load balancer) without a re-sync."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from laredo_testing.eventually import eventually

from laredo_client import BackoffPolicy, LaredoClient
from laredo_core.config import load_settings
from laredo_core.stream import naming
from laredo_fanout.main import FanoutApp, build
from libs.client.tests.tcp_balancer import TcpBalancer
from services.fanout.tests.fanout_testkit import SOURCE, TABLE, Batches, delete, insert, row, update

pytestmark = pytest.mark.integration


class Fanout:
    """Fan-out instances consuming one JetStream stream, and a publisher of synthetic ChangeBatch messages."""

    def __init__(self, js: Any, prefix: str, nats_url: str, tmp_path: Path, extra_config: str = "") -> None:
        self.js, self.prefix, self.nats_url, self.tmp_path = js, prefix, nats_url, tmp_path
        self.extra_config = extra_config  # more HOCON for every instance (tls { ... }, auth { ... })
        self.batches = Batches()
        self.apps: list[FanoutApp] = []
        self._runs: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    @property
    def address(self) -> str:
        return address_of(self.apps[0])

    async def start_instance(self) -> FanoutApp:
        config = write_config(self.tmp_path / f"laredo-{len(self.apps)}.conf", self.nats_url, self.prefix,
                              self.extra_config)
        app = build(load_settings(config, env={}))
        stop = asyncio.Event()
        task = asyncio.create_task(app.run(stop))
        await eventually(lambda: app.started.is_set() or task.done(), what="a fan-out instance to start")
        self.apps.append(app)
        self._runs.append((stop, task))
        return app

    async def stop_all(self) -> None:
        for stop, _ in self._runs:
            stop.set()
        await asyncio.wait_for(asyncio.gather(*(task for _, task in self._runs)), 20)

    async def publish(self, *messages: bytes | list[bytes]) -> None:
        subject = naming.table_subject(self.prefix, SOURCE, TABLE)
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                await self.js.publish(subject, data)


def address_of(app: FanoutApp) -> str:
    return f"127.0.0.1:{app.grpc_port}"


def write_config(path: Path, nats_url: str, prefix: str, extra: str = "") -> Path:
    path.write_text(f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{
  type = replication-fanout
  journal {{ max_entries = 10000, max_age = 1h }}
  heartbeat_interval = 200ms
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0, drain_grace = 100ms }}
{extra}
""")
    return path


@asynccontextmanager
async def fanout_on_stream(nats_url: str, unique_name: str, tmp_path: Path,
                           extra_config: str = "") -> AsyncIterator[Fanout]:
    """One fan-out instance started on a new JetStream stream (deleted at the end)."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = naming.stream_name(unique_name, SOURCE)
    await js.add_stream(name=stream, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    pair = Fanout(js, unique_name, nats_url, tmp_path, extra_config)
    try:
        await pair.start_instance()
        yield pair
    finally:
        await pair.stop_all()
        await js.delete_stream(stream)
        await nc.close()


@pytest.fixture
async def fanout(nats_url: str, unique_name: str, tmp_path: Path) -> AsyncIterator[Fanout]:
    async with fanout_on_stream(nats_url, unique_name, tmp_path) as pair:
        yield pair


def client_for(address: str, path: Path | None) -> LaredoClient:
    return LaredoClient(address, TABLE.schema, TABLE.name, local_snapshot_path=path,
                        lookup_fields=("name",), client_id="restarting-app", max_batch_size=32,
                        backoff=BackoffPolicy(initial=0.05, maximum=0.5), heartbeat_timeout=5)


async def test_a_client_restarted_from_its_local_snapshot_catches_up_by_delta(fanout: Fanout,
                                                                             tmp_path: Path) -> None:
    model = {i: row(i) for i in range(1, 41)}
    await fanout.publish(fanout.batches.baseline(list(model.values()), chunk_rows=16))
    path = tmp_path / "app" / "items.json"

    first = client_for(fanout.address, path)
    await first.start()
    await first.await_ready(15)
    await fanout.publish(fanout.batches.transaction(update(row(1, "one")), delete({"id": 2})))
    model[1] = row(1, "one")
    del model[2]
    await eventually(lambda: sorted(first.all(), key=lambda r: r["id"]) == list(model.values()),
                     what="the first client equals the table")
    assert first.stats.modes == ["FULL_SNAPSHOT"]
    await first.stop()
    assert path.exists()

    # changes while the application is down
    await fanout.publish(fanout.batches.transaction(insert(row(50)), update(row(3, "three"))),
                         fanout.batches.transaction(delete({"id": 4})))
    model[50], model[3] = row(50), row(3, "three")
    del model[4]

    second = client_for(fanout.address, path)
    heard: list[tuple[Any, Any]] = []
    second.listen(lambda old, new: heard.append((old, new)))
    await second.start()
    assert second.get(4) == row(4), "the restored rows are served before the first stream"
    await second.await_ready(15)
    try:
        await eventually(lambda: sorted(second.all(), key=lambda r: r["id"]) == list(model.values()),
                         what="the restarted client equals the table")
        assert second.stats.modes == ["DELTA"] and second.stats.full_snapshots == 0
        assert second.full_resyncs == 0 and second.stats.entries_applied == 3
        assert second.lookup("three")["id"] == 3 and isinstance(second.get(50)["id"], int)
        assert heard == [(None, row(50)), (row(3), row(3, "three")), (row(4), None)]
    finally:
        await second.stop()


async def test_goaway_hands_a_live_client_to_another_instance_without_a_resync(fanout: Fanout) -> None:
    """Two instances behind a load balancer; the first drains while changes flow."""
    model = {i: row(i) for i in range(1, 31)}
    await fanout.publish(fanout.batches.baseline(list(model.values()), chunk_rows=16))
    first = fanout.apps[0]
    second = await fanout.start_instance()
    balancer = TcpBalancer(address_of(first))
    await balancer.start()
    client = client_for(balancer.address, None)
    try:
        await client.start()
        await client.await_ready(15)
        balancer.backend = address_of(second)  # the balancer deregistered the instance about to drain

        async def write(count: int) -> None:
            for i in range(100, 100 + count):
                await fanout.publish(fanout.batches.transaction(insert(row(i)), update(row(i % 30 + 1, f"v{i}"))))
                model[i], model[i % 30 + 1] = row(i), row(i % 30 + 1, f"v{i}")

        writer = asyncio.create_task(write(60))
        await eventually(lambda: client.count() > 35, what="changes flowing before the drain")
        first.targets.drain("", "", "draining", first.clock.now() + 10)  # GoAway; streams end after 10 s
        await writer
        await eventually(lambda: client.stats.handoffs == 1, what="the handoff to the second instance")
        await eventually(lambda: sorted(client.all(), key=lambda r: r["id"]) == sorted(model.values(),
                         key=lambda r: r["id"]), what="the client equals the table after the handoff")
        assert client.stats.modes == ["FULL_SNAPSHOT", "DELTA"] and client.full_resyncs == 0
        assert client.stats.reconnects == 0
    finally:
        await client.stop()
        await balancer.stop()
