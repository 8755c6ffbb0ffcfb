"""Real PostgreSQL + NATS: baseline, streamed transactions, confirmation, restart, health and tracing."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from pathlib import Path

import aiohttp
import psycopg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from laredo_kernel.changes import Action, BatchKind, TableId
from laredo_kernel.position import parse_lsn
from laredo_core.stream.naming import HEADER_END_LSN, HEADER_MSG_ID

from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.adapters.nats_state_store import NatsKvStateStore
from laredo_ingest.application.status import IngestPhase
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import assert_replica_equals_table

pytestmark = pytest.mark.integration

BASELINE_ROWS = 300
COLUMNS = "id, name, qty, price, tags, updated"


async def create_items(pg: psycopg.AsyncConnection) -> None:
    await pg.execute("""CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric(10,2),
                        tags text[], updated timestamptz DEFAULT '2026-01-02 03:04:05.678+00')""")
    await pg.execute("""INSERT INTO items (id, name, qty, price, tags)
                        SELECT i, 'item ' || i, CASE WHEN i %% 7 = 0 THEN NULL ELSE i * 2 END, i / 3.0,
                               ARRAY['a' || i, 'b,"x"'] FROM generate_series(1, %s::int) AS i""", (BASELINE_ROWS,))


async def table_rows(pg: psycopg.AsyncConnection) -> dict[int, dict]:
    cur = await pg.execute(f"SELECT {COLUMNS} FROM items ORDER BY id")
    names = COLUMNS.split(", ")
    return {row[0]: dict(zip(names, row)) for row in await cur.fetchall()}


async def slot_confirmed(pg: psycopg.AsyncConnection, slot: str) -> int:
    cur = await pg.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    row = await cur.fetchone()
    return parse_lsn(row[0]) if row and row[0] else 0


def apply(messages: list, state: dict[int, dict]) -> None:
    for m in messages:
        for change in m.batch.changes:
            if change.action in (Action.INSERT, Action.UPDATE):
                state[change.new["id"]] = change.new
            elif change.action is Action.DELETE:
                state.pop(change.old["id"])


async def test_baseline_stream_confirm_and_restart(pg, make_app, read_stream, start_app, unique_name) -> None:
    await create_items(pg)
    exporter = InMemorySpanExporter()
    first = start_app(make_app(span_exporter=exporter))
    await eventually(lambda: first.app.status.ready, timeout=30, what="ingest ready (baseline done, streaming)")

    messages = await read_stream()
    kinds = [m.batch.kind for m in messages]
    assert kinds[0] is BatchKind.BASELINE_BEGIN and kinds[-1] is BatchKind.BASELINE_END
    assert kinds.count(BatchKind.BASELINE_ROWS) == -(-BASELINE_ROWS // 64)
    assert messages[-1].batch.baseline_row_count == BASELINE_ROWS
    baseline_state: dict[int, dict] = {}
    apply(messages, baseline_state)
    assert baseline_state == await table_rows(pg)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{first.app.health_port}/health/ready") as response:
            assert response.status == 200 and (await response.json())["phase"] == "streaming"

    async with pg.transaction():
        await pg.execute("INSERT INTO items (id, name, qty) VALUES (1001, 'new', 1), (1002, 'newer', 2)")
    await pg.execute("UPDATE items SET qty = -1, tags = NULL WHERE id IN (3, 1001)")
    await pg.execute("DELETE FROM items WHERE id = 4")
    async with pg.transaction():
        await pg.execute("INSERT INTO items (id, name) SELECT i, 'bulk' FROM generate_series(2000, 2249) i")
        await pg.execute("UPDATE items SET name = 'renamed' WHERE id = 2")
        await pg.execute("DELETE FROM items WHERE id = 2100")
    expected = await table_rows(pg)

    async def streamed_up_to_date() -> list:
        stored = await read_stream()
        state = dict(baseline_state)
        apply([m for m in stored if m.batch.kind is BatchKind.TRANSACTION], state)
        return stored if state == expected else []

    stored = await eventually(streamed_up_to_date, timeout=30, what="every change in the stream")
    transactions = [m for m in stored if m.batch.kind is BatchKind.TRANSACTION]
    assert len({m.headers[HEADER_MSG_ID] for m in stored}) == len(stored), "a message id appears twice"
    assert len({m.batch.commit_lsn for m in transactions}) == 4
    assert [len(m.batch.changes) for m in transactions][-3:] == [100, 100, 52]  # big transaction chunked
    positions = [c.position for m in stored for c in m.batch.changes]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert all(p.lsn == messages[0].batch.commit_lsn for p in positions[:BASELINE_ROWS])
    ends = [m for m in transactions if HEADER_END_LSN in m.headers]
    assert [m.batch.last_chunk for m in ends] == [True] * 4
    last_end = parse_lsn(ends[-1].headers[HEADER_END_LSN])
    assert ends[-1].batch.end_lsn == last_end
    assert {m.batch.columns for m in stored} == {messages[0].batch.columns}  # baseline and stream agree
    assert messages[0].batch.key_columns == ("id",)
    deletes = [c for m in transactions for c in m.batch.changes if c.action is Action.DELETE]
    assert [c.old for c in deletes] == [{"id": 4}, {"id": 2100}] and all(c.old_is_key_only for c in deletes)

    await eventually(lambda: first.app.confirmed_lsn >= last_end, what="ingest confirmed the last commit")
    await eventually(lambda: slot_confirmed(pg, unique_name), what="slot confirmed")
    assert await slot_confirmed(pg, unique_name) >= last_end
    publish_spans = [s for s in exporter.get_finished_spans() if s.name == "ingest.publish"]
    span_ids = {f"{s.context.span_id:016x}" for s in publish_spans}
    assert {m.headers["traceparent"].split("-")[2] for m in transactions} <= span_ids
    assert [s.name for s in exporter.get_finished_spans()].count("ingest.baseline") == 1

    await first.stop_cleanly()
    assert first.app.status.phase is IngestPhase.STOPPED
    assert await slot_confirmed(pg, unique_name) == first.app.confirmed_lsn
    await pg.execute("INSERT INTO items (id, name) VALUES (3000, 'while stopped')")

    second = start_app(make_app())
    await eventually(lambda: second.app.status.ready, timeout=30, what="second run streaming")
    after = await eventually(lambda: _has_id(read_stream, 3000), timeout=30, what="change made while stopped")
    assert [m.batch.kind for m in after].count(BatchKind.BASELINE_BEGIN) == 1, "restart took a new baseline"
    assert len({m.headers[HEADER_MSG_ID] for m in after}) == len(after)
    await pg.execute("INSERT INTO items (id, name) VALUES (3001, 'then killed')")
    await eventually(lambda: _has_id(read_stream, 3001), timeout=30, what="change before the kill")
    await second.kill()  # no clean stop: whatever is unconfirmed is streamed again

    third = start_app(make_app())
    await eventually(lambda: third.app.status.ready, timeout=30, what="third run streaming")
    await pg.execute("INSERT INTO items (id, name) VALUES (3002, 'after the kill')")
    final = await eventually(lambda: _has_id(read_stream, 3002), timeout=30, what="change after the kill")
    ids = [c.new["id"] for m in final if m.batch.kind is BatchKind.TRANSACTION for c in m.batch.changes if c.new]
    assert ids.count(3001) == 1 and ids.count(3000) == 1, "a change was lost or stored twice"
    assert [m.batch.kind for m in final].count(BatchKind.BASELINE_BEGIN) == 1
    await third.stop_cleanly()


async def _has_id(read_stream, row_id: int) -> list:
    stored = await read_stream()
    found = any(c.new and c.new.get("id") == row_id for m in stored for c in m.batch.changes)
    return stored if found else []


async def test_transactions_streamed_again_after_a_lost_confirmation_are_dropped_by_jetstream(
        pg, ingest_settings, make_app, read_stream, start_app, nats_url, unique_name) -> None:
    await create_items(pg)
    first = start_app(make_app())
    await eventually(lambda: first.app.status.ready, timeout=30, what="first run streaming")
    # A copy of the slot keeps today's position: resuming from it is a restart whose confirmations were lost.
    await pg.execute("SELECT pg_copy_logical_replication_slot(%s, %s)", (unique_name, f"{unique_name}_copy"))
    await pg.execute("INSERT INTO items (id, name) VALUES (4000, 'once')")
    await pg.execute("INSERT INTO items (id, name) SELECT i, 'bulk' FROM generate_series(4001, 4250) i")
    stored = await eventually(lambda: _has_id(read_stream, 4250), timeout=30, what="both transactions stored")
    ends = [m.batch.end_lsn for m in stored if m.batch.end_lsn]
    await eventually(lambda: first.app.confirmed_lsn >= ends[-1], what="first run confirmed both")
    await first.stop_cleanly()

    connection = NatsConnection([nats_url])
    store = NatsKvStateStore(connection, bucket=f"{unique_name}_state")
    await store.put("main", dataclasses.replace(await store.get("main"), slot_name=f"{unique_name}_copy"))
    await connection.close()
    second = start_app(make_app(ingest_settings(extra=f"sources.main.slot_name = {unique_name}_copy")))
    await eventually(lambda: second.app.confirmed_lsn >= ends[-1], timeout=30, what="second run caught up")
    assert second.app.status.baseline_complete and second.app.status.published_messages == len(ends) + 2  # 1 + 3 chunks
    again = await read_stream()
    assert [m.headers[HEADER_MSG_ID] for m in again] == [m.headers[HEADER_MSG_ID] for m in stored]
    await second.stop_cleanly()


async def test_an_unfinished_baseline_in_the_state_store_forces_a_new_one(
        pg, ingest_settings, make_app, read_stream, start_app, nats_url, unique_name) -> None:
    await create_items(pg)
    settings = ingest_settings()
    first = start_app(make_app(settings))
    await eventually(lambda: first.app.status.ready, timeout=30, what="first baseline")
    await first.stop_cleanly()

    connection = NatsConnection([nats_url])
    store = NatsKvStateStore(connection, bucket=f"{unique_name}_state")
    state = await store.get("main")
    assert state is not None and state.baseline_complete and state.slot_name == unique_name
    assert state.tables == ("public.items",)
    await store.put("main", dataclasses.replace(state, baseline_complete=False))  # as if killed mid-baseline
    await connection.close()

    second = start_app(make_app(settings))
    await eventually(lambda: second.app.status.ready, timeout=30, what="second baseline")
    stored = await read_stream()
    baselines = {m.batch.baseline_id for m in stored if m.batch.kind is BatchKind.BASELINE_END}
    assert len(baselines) == 2
    new_state = await _state(nats_url, f"{unique_name}_state")
    assert new_state.baseline_complete and new_state.baseline_id != state.baseline_id
    assert new_state.baseline_lsn > state.baseline_lsn  # a new slot, consistent at a later point
    await second.stop_cleanly()


async def _state(nats_url: str, bucket: str):
    connection = NatsConnection([nats_url])
    try:
        return await NatsKvStateStore(connection, bucket=bucket).get("main")
    finally:
        await connection.close()


async def test_truncate_messages_and_unpublished_tables(pg, make_app, read_stream, start_app, unique_name) -> None:
    await create_items(pg)
    await pg.execute("CREATE TABLE other (id int PRIMARY KEY)")
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="ingest ready")
    await pg.execute("INSERT INTO other VALUES (1)")  # not published: nothing to send, still confirmable
    await pg.execute("SELECT pg_logical_emit_message(true, 'laredo-test', 'hello')")
    async with pg.transaction():
        await pg.execute("INSERT INTO items (id, name) VALUES (5000, 'doomed')")
        await pg.execute("TRUNCATE items")
    cur = await pg.execute("SELECT pg_current_wal_lsn()::text")
    after_truncate = parse_lsn((await cur.fetchone())[0])

    async def truncated() -> list:
        stored = await read_stream()
        return [m for m in stored if m.batch.kind is BatchKind.TRANSACTION]

    [message] = await eventually(truncated, timeout=30, what="the truncate transaction")
    assert [c.action for c in message.batch.changes] == [Action.INSERT, Action.TRUNCATE]
    assert [c.position.ordinal for c in message.batch.changes] == [0, 1]
    await eventually(lambda: running.app.confirmed_lsn >= message.batch.end_lsn, what="truncate confirmed")
    assert message.batch.end_lsn <= after_truncate
    await running.stop_cleanly()


async def test_the_command_line_streams_until_sigterm(pg, ingest_settings, tmp_path, read_stream) -> None:
    await create_items(pg)
    ingest_settings()  # writes the configuration file
    [config] = sorted(tmp_path.glob("laredo-*.conf"))
    script = Path(sys.executable).with_name("laredo-ingest")
    process = await asyncio.create_subprocess_exec(str(script), "--config", str(config), "--log-level", "warning",
                                                   stderr=asyncio.subprocess.PIPE)
    try:
        stored = await eventually(read_stream, timeout=30, what="the baseline in the stream")
        assert stored[0].batch.kind is BatchKind.BASELINE_BEGIN
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_terminated_walsender_is_a_restart_from_the_slot(pg, pg_dsn, make_app, read_stream, start_app,
                                                                 nats_url, unique_name) -> None:
    await create_items(pg)
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="ingest ready")
    await pg.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = %s",
                     (unique_name,))
    await pg.execute("INSERT INTO items (id, name) VALUES (5000, 'after the walsender died')")
    stored = await eventually(lambda: _has_id(read_stream, 5000), timeout=30, what="the change after the restart")
    assert running.app.status.restarts >= 1 and running.app.status.ready
    assert [m.batch.kind for m in stored].count(BatchKind.BASELINE_BEGIN) == 1
    await assert_replica_equals_table(nats_url, unique_name, pg_dsn, TableId("public", "items"))
    await running.stop_cleanly()
