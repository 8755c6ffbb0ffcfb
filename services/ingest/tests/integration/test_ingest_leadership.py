"""Leader lease and commands through a real Redis: a standby takes over from a killed leader, commands are
carried out by the leader; a downstream replica equals the table afterwards."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_core.coordination.ports import CommandKind, CommandStatus
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import assert_replica_equals_table, read_stream

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ITEMS = TableId("public", "items")
LEASE_TTL = 2.0


@pytest.fixture
async def coordination(redis_url: str, unique_name: str) -> AsyncIterator[RedisCoordinationStore]:
    store = RedisCoordinationStore(redis_url, unique_name)
    yield store
    await store.aclose()


@pytest.fixture
async def ingest_instances(ingest_settings, tmp_path: Path, redis_url: str, unique_name: str) -> AsyncIterator:
    """Start `laredo-ingest` instances of one source sharing a Redis; killed at teardown if still running."""
    ingest_settings(extra=f"""
        redis {{ url = {json.dumps(redis_url)}, key_prefix = {unique_name} }}
        ingest {{ lease_ttl = {LEASE_TTL}s, lease_renew_every = 500ms, heartbeat_interval = 500ms }}""")
    config = sorted(tmp_path.glob("laredo-*.conf"))[-1]
    processes: list[asyncio.subprocess.Process] = []

    async def start(instance_id: str) -> asyncio.subprocess.Process:
        script = Path(sys.executable).with_name("laredo-ingest")
        process = await asyncio.create_subprocess_exec(
            str(script), "--config", str(config), "--set", f"ingest.instance_id={instance_id}", "--log-level",
            "warning", stderr=asyncio.subprocess.DEVNULL)
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def phase_of(store: RedisCoordinationStore, instance_id: str) -> str | None:
    for instance in await store.instances("ingest"):
        if instance.instance_id == instance_id:
            return str(instance.status.get("phase"))
    return None


async def test_a_standby_takes_over_from_a_killed_leader_and_commands_reach_the_leader(
        pg, pg_dsn, ingest_instances, coordination, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    await pg.execute("INSERT INTO items SELECT i, 'row ' || i FROM generate_series(1, 500) i")
    leader = await ingest_instances("a")
    await eventually(lambda: phase_of(coordination, "a"), timeout=30, what="instance a registered")
    await eventually(lambda: _equals(phase_of(coordination, "a"), "streaming"), timeout=30, what="a streams")
    await ingest_instances("b")
    await eventually(lambda: _equals(phase_of(coordination, "b"), "standby"), timeout=30, what="b is standby")
    assert await coordination.lease_holder("ingest:main") == "a"
    cur = await pg.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender' "
                           "AND datname = current_database()")
    assert (await cur.fetchone())[0] == 1, "only the leader has a replication connection"
    for i in range(1000, 1100):
        await pg.execute("INSERT INTO items VALUES (%s, 'before the kill')", (i,))
    leader.send_signal(signal.SIGKILL)
    await leader.wait()
    killed = time.monotonic()
    await pg.execute("UPDATE items SET name = 'while nobody leads' WHERE id <= 50")
    await eventually(lambda: _equals(coordination.lease_holder("ingest:main"), "b"), timeout=30,
                     what="b holds the lease")
    await eventually(lambda: _equals(phase_of(coordination, "b"), "streaming"), timeout=30, what="b streams")
    took_over = time.monotonic() - killed
    assert took_over < LEASE_TTL + 5, f"takeover took {took_over:.1f}s"
    await pg.execute("INSERT INTO items VALUES (-1, 'after the takeover')")
    await eventually(lambda: _has_item(nats_url, unique_name, -1), timeout=30, what="the change after takeover")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    assert replica.tables[ITEMS].baselines == 1, "the standby resumed the slot instead of re-baselining"

    command_id = await coordination.send_command("ingest:main", CommandKind.RELOAD, {"table": "items"})
    result = await coordination.command_result(command_id, 60)
    assert result is not None and result.status is CommandStatus.SUCCEEDED and result.executed_by == "b"
    kinds = [m.batch.kind for m in await read_stream(nats_url, unique_name)]
    assert kinds.count(BatchKind.BASELINE_END) == 2
    rejected = await coordination.command_result(
        await coordination.send_command("ingest:main", CommandKind.RELOAD, {"table": "nope"}), 30)
    assert rejected is not None and rejected.status is CommandStatus.REJECTED and "not a configured" in rejected.message


async def _equals(value, expected) -> bool:
    return await value == expected


async def _has_item(nats_url: str, prefix: str, item_id: int) -> bool:
    return any(c.new and c.new.get("id") == item_id for m in await read_stream(nats_url, prefix)
               for c in m.batch.changes)
