"""Operator requests against real PostgreSQL and NATS: on-demand re-baseline under load, pause and resume,
slot reset."""

from __future__ import annotations

import asyncio
import random

import psycopg
import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import StreamReplica, assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

ITEMS, OTHER = TableId("public", "items"), TableId("public", "other")


async def write_continuously(dsn: str, stop: asyncio.Event) -> int:
    """Small transactions on both tables until stopped: inserts, updates, deletes."""
    rng, transactions = random.Random(7), 0
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        next_id = 10_000
        while not stop.is_set():
            async with conn.transaction():
                next_id += 1
                await conn.execute("INSERT INTO items VALUES (%s, 'new')", (next_id,))
                await conn.execute("UPDATE items SET name = name || '+' WHERE id = %s", (rng.randint(1, next_id),))
                await conn.execute("DELETE FROM items WHERE id = %s", (rng.randint(1, next_id),))
                await conn.execute("INSERT INTO other VALUES (%s)", (next_id,))
            transactions += 1
            await asyncio.sleep(0.002)
    return transactions


@pytest.mark.slow
async def test_a_reload_under_load_loses_nothing_and_leaves_no_stale_row(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text); CREATE TABLE other (id int PRIMARY KEY)")
    await pg.execute("INSERT INTO items SELECT i, 'row ' || i FROM generate_series(1, 3000) i")
    running = start_app(make_app(ingest_settings(tables=("items", "other"))))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    stop_writing = asyncio.Event()
    writer = asyncio.create_task(write_continuously(pg_dsn, stop_writing))
    try:
        await eventually(lambda: running.app.status.transactions > 20, timeout=30, what="writes streaming")
        outcome = await asyncio.wait_for(running.app.control.reload([ITEMS]), 60)
        assert outcome == "re-baselined public.items"
        await eventually(lambda: running.app.status.transactions > 60, timeout=30, what="more writes")
        await asyncio.wait_for(running.app.control.reload(), 60)  # every table
    finally:
        stop_writing.set()
        written = await writer
    assert written > 60
    await pg.execute("INSERT INTO items VALUES (-1, 'last')")
    await eventually(lambda: _has_item(nats_url, unique_name, -1), timeout=30, what="the last insert")
    for table in (ITEMS, OTHER):
        replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, table)
    assert replica.tables[ITEMS].baselines == 3 and replica.tables[OTHER].baselines == 2
    # A consumer that lost every message between its first baseline and the reload (stale rows, missed
    # deletes) is repaired by the reload: BASELINE_END removes what the new baseline does not contain.
    messages = await read_stream(nats_url, unique_name)
    items = [m for m in messages if m.batch.table == ITEMS]
    first_end = next(i for i, m in enumerate(items) if m.batch.kind is BatchKind.BASELINE_END)
    reload_begin = next(i for i, m in enumerate(items) if i > first_end and m.batch.kind is BatchKind.BASELINE_BEGIN)
    stale = StreamReplica(items[: first_end + 1] + items[first_end + 1 : first_end + 4] + items[reload_begin:])
    assert stale.rows(ITEMS) == replica.rows(ITEMS)
    await running.stop_cleanly()


async def _has_item(nats_url: str, prefix: str, item_id: int) -> bool:
    return any(c.new and c.new.get("id") == item_id for m in await read_stream(nats_url, prefix)
               for c in m.batch.changes)


async def test_pause_holds_the_position_and_survives_a_restart_resume_catches_up(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    assert await running.app.control.pause() == "paused"
    assert running.app.status.phase.value == "paused"
    confirmed = running.app.confirmed_lsn
    await pg.execute("INSERT INTO items VALUES (1, 'while paused')")
    await asyncio.sleep(1.0)  # absence can only be shown over time: two status intervals
    assert not await _has_item(nats_url, unique_name, 1) and running.app.confirmed_lsn == confirmed
    await running.stop_cleanly()
    second = start_app(make_app())
    await eventually(lambda: second.app.status.phase.value == "paused", timeout=30, what="restarted paused")
    assert not await _has_item(nats_url, unique_name, 1)
    assert await second.app.control.resume() == "resumed"
    await eventually(lambda: _has_item(nats_url, unique_name, 1), timeout=30, what="the change after resume")
    await second.stop_cleanly()


async def test_reset_recreates_the_slot_tells_downstream_and_rebaselines(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'a')")
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    first_baseline = running.app.status.baseline_id
    outcome = await asyncio.wait_for(running.app.control.reset(), 60)
    assert outcome.startswith("slot reset; new baseline") and running.app.status.baseline_id != first_baseline
    await pg.execute("INSERT INTO items VALUES (2, 'b')")
    await eventually(lambda: _has_item(nats_url, unique_name, 2), timeout=30, what="streaming after the reset")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    [resync] = replica.tables[ITEMS].resyncs
    assert "reset by an operator" in resync.reason and replica.tables[ITEMS].baselines == 2
    await running.stop_cleanly()


async def test_metrics_report_lag_rates_batch_sizes_and_slot_state(pg, ingest_settings, make_app, start_app,
                                                                   nats_url, unique_name) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    reader = InMemoryMetricReader()
    running = start_app(make_app(ingest_settings(extra="sources.main.slot_check_interval = 200ms"),
                                 metric_reader=reader))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    await pg.execute("INSERT INTO items SELECT i, 'x' FROM generate_series(1, 250) i")
    await eventually(lambda: running.app.status.changes == 250, timeout=30, what="the changes published")
    await eventually(lambda: running.app.status.slot_wal_status == "reserved", timeout=30, what="a slot check")

    def values() -> dict[str, float]:
        data = reader.get_metrics_data()
        return {m.name: m.data.data_points[0].value for rm in data.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics if m.data.data_points}

    metrics = values()
    assert metrics["laredo.ingest.changes_total"] == 250 and metrics["laredo.ingest.batch_changes_max"] == 100
    assert metrics["laredo.ingest.streaming"] == 1 and metrics["laredo.ingest.slot_lost"] == 0
    assert {"laredo.ingest.lag_bytes", "laredo.ingest.lag_seconds", "laredo.ingest.changes_per_second",
            "laredo.ingest.baseline_rows", "laredo.ingest.baseline_eta_seconds"} <= set(metrics)
    assert running.app.status.report()["slot_wal_status"] == "reserved"
    await running.stop_cleanly()
