"""The query instance in the coordination store: status heartbeat with columns, pokes on readiness, commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from laredo_core.config import load_settings
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import CommandKind, CommandStatus, InstanceStatus
from laredo_core.coordination.status_reports import instance_from_event
from laredo_core.coordination.subscriptions import EventSubscription
from laredo_query.adapters.memory import MemoryChangeFeed
from laredo_query.config import read_query_config
from laredo_query.main import QueryApp, build
from laredo_testing.eventually import eventually
from services.query.tests.query_testkit import TABLE, Batches, row

CONFIG = """
sources { pg { type = postgresql, connection = "host=unused" } }
tables = [ { source = pg, schema = public, table = items, targets = [ {
  type = indexed-memory, lookup_fields = [email] } ] } ]
query { status_interval = 30s }
"""


@dataclass
class Running:
    app: QueryApp
    feed: MemoryChangeFeed
    store: InMemoryCoordinationStore
    events: EventSubscription


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    feed, store = MemoryChangeFeed(json_values=True), InMemoryCoordinationStore(block=0.05)
    events = store.events()
    await events.join()
    app = build(load_settings(tmp_path / "laredo.conf", env={}), feed=feed, coordination=store,
                grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0, instance_id="q1")
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: app.started.is_set() or task.done(), what="the app to start")
    if task.done():
        task.result()
    try:
        yield Running(app, feed, store, events)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await events.aclose()


async def instance(store: InMemoryCoordinationStore) -> InstanceStatus | None:
    found = await store.instances("query")
    return found[0] if found else None


async def test_the_status_heartbeat_reports_tables_and_pokes_when_ready(running: Running) -> None:
    first = instance_from_event(await asyncio.wait_for(anext(running.events), 5))  # its first heartbeat
    assert first is not None and first.instance_id == "q1" and first.status["ready"] is False
    entry = first.status["tables"]["public.items"]
    assert entry["baseline_complete"] is False and entry["columns"] == []

    for data in Batches().baseline([row(1), row(2)]):
        running.feed.publish(TABLE, data)
    # The status interval is 30 s: only a poke can bring the news this fast.
    event = await asyncio.wait_for(anext(running.events), 5)
    poked = instance_from_event(event)
    assert poked is not None and poked.status["ready"] is True
    entry = poked.status["tables"]["public.items"]
    assert entry["baseline_complete"] is True and entry["rows"] == 2 and entry["position"]
    assert [(c["name"], c["type"], c["primary_key_ordinal"]) for c in entry["columns"]][:2] == [
        ("id", "int8", 1), ("email", "text", 0)]
    stored = await instance(running.store)
    assert stored is not None and stored.status["ready"] is True


async def test_commands_are_answered_and_the_instance_deregisters_on_stop(tmp_path: Path) -> None:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    store = InMemoryCoordinationStore(block=0.05)
    app = build(load_settings(tmp_path / "laredo.conf", env={}), feed=MemoryChangeFeed(json_values=True),
                coordination=store, grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0,
                instance_id="q1")
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: instance(store), what="the query instance registered")
    command_id = await store.send_command("query:q1", CommandKind.DRAIN)
    result = await store.command_result(command_id, timeout=5)
    assert result is not None and result.status is CommandStatus.REJECTED and result.executed_by == "q1"
    assert "does not carry out drain" in result.message
    stop.set()
    await asyncio.wait_for(task, 10)
    assert await store.instances("query") == []


def test_coordination_follows_the_redis_section(tmp_path: Path) -> None:
    path = tmp_path / "laredo.conf"
    path.write_text(CONFIG)
    assert build(load_settings(path, env={}), feed=MemoryChangeFeed(json_values=True)).coordinator is None
    path.write_text(CONFIG + 'redis { url = "redis://127.0.0.1:1/0", key_prefix = x }\n')
    assert read_query_config(load_settings(path, env={})).status_interval == 30.0
    assert build(load_settings(path, env={}), feed=MemoryChangeFeed(json_values=True)).coordinator is not None
    path.write_text(CONFIG.replace("30s", "-1s"))
    with pytest.raises(Exception, match="status_interval"):
        read_query_config(load_settings(path, env={}))


async def test_data_keeps_flowing_while_the_store_is_unreachable(tmp_path: Path) -> None:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    store, feed = InMemoryCoordinationStore(block=0.05), MemoryChangeFeed(json_values=True)
    store.unavailable = True
    app = build(load_settings(tmp_path / "laredo.conf", env={}), feed=feed, coordination=store,
                grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0, instance_id="q1")
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await eventually(lambda: app.started.is_set(), what="the app to start without its store")
        for data in Batches().baseline([row(1)]):
            feed.publish(TABLE, data)
        await eventually(lambda: app.readiness()[0], what="the table loaded while the store is down")
        store.unavailable = False
        registered = await eventually(lambda: instance(store), what="the instance registered once it is back")
        assert registered.status["ready"] is True
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
