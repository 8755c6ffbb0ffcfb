"""Ingest never harms its source: tables it cannot publish safely stay out of the publication, and inactive
replication slots that hold back WAL are reported."""

from __future__ import annotations

import logging

import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import read_stream

pytestmark = pytest.mark.integration

ITEMS = TableId("public", "items")


async def published_tables(pg, publication: str) -> set[str]:
    cur = await pg.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s",
                           (publication,))
    return {row[0] for row in await cur.fetchall()}


async def test_a_table_without_replica_identity_is_refused_and_the_applications_writes_keep_working(
        pg, ingest_settings, make_app, start_app, nats_url, unique_name, caplog) -> None:
    publication = f"{unique_name}_pub"
    await pg.execute(f"""
        CREATE TABLE items (id int PRIMARY KEY, v text);
        CREATE TABLE logs (line text);
        CREATE TABLE nothing (id int PRIMARY KEY, v text);
        ALTER TABLE nothing REPLICA IDENTITY NOTHING;
        INSERT INTO items VALUES (1, 'one');
        INSERT INTO logs VALUES ('a'), ('b');
        INSERT INTO nothing VALUES (1, 'n1');
        CREATE PUBLICATION {publication} FOR TABLE items, logs;  -- as an earlier ingest left it
    """)
    caplog.set_level(logging.ERROR)
    running = start_app(make_app(ingest_settings(tables=("items", "logs", "nothing"))))
    await eventually(lambda: running.app.status.ready, timeout=30, what="the other table served")

    assert await published_tables(pg, publication) == {"public.items"}, "refused tables are never published"
    refused = running.app.status.refused_tables
    assert set(refused) == {"public.logs", "public.nothing"}
    assert "no primary key and REPLICA IDENTITY DEFAULT" in refused["public.logs"]
    assert "add a primary key, or run ALTER TABLE public.logs REPLICA IDENTITY FULL" in refused["public.logs"]
    assert "REPLICA IDENTITY NOTHING" in refused["public.nothing"]
    assert running.app.status.report()["refused_tables"] == refused
    assert running.app.status.gauges()["refused_tables"] == 2.0
    assert "public.logs has no primary key" in caplog.text

    # The application's own writes on the refused tables succeed while ingest streams the others.
    await pg.execute("UPDATE logs SET line = 'changed' WHERE line = 'a'")
    await pg.execute("DELETE FROM logs WHERE line = 'b'")
    await pg.execute("UPDATE nothing SET v = 'n2'")
    await pg.execute("DELETE FROM nothing")
    await pg.execute("UPDATE items SET v = 'uno' WHERE id = 1")

    async def item_update_streamed() -> bool:
        messages = await read_stream(nats_url, unique_name)
        return any(m.batch.kind is BatchKind.TRANSACTION and m.batch.table == ITEMS for m in messages)

    await eventually(item_update_streamed, timeout=30, what="the update of items streamed")
    tables = {m.batch.table for m in await read_stream(nats_url, unique_name)}
    assert tables == {ITEMS}, "nothing of the refused tables is published, not even their baseline"
    await running.stop_cleanly()


async def test_when_every_table_is_refused_ingest_waits_for_a_fix_without_touching_the_source(
        pg, ingest_settings, make_app, start_app, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int, v text); INSERT INTO items VALUES (1, 'one')")
    running = start_app(make_app(ingest_settings()))
    await eventually(lambda: "no configured table of source main can be published" in running.app.status.last_error,
                     timeout=30, what="the refusal reported")
    assert "REPLICA IDENTITY FULL" in running.app.status.last_error
    cur = await pg.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (unique_name,))
    assert (await cur.fetchone())[0] == 0, "no slot is created for nothing"
    assert await published_tables(pg, f"{unique_name}_pub") == set()
    await pg.execute("UPDATE items SET v = 'uno'")

    await pg.execute("ALTER TABLE items REPLICA IDENTITY FULL")  # the fix the error names
    await eventually(lambda: running.app.status.ready, timeout=30, what="the fixed table served without a restart")
    assert running.app.status.refused_tables == {}
    assert await published_tables(pg, f"{unique_name}_pub") == {"public.items"}
    await running.stop_cleanly()


async def test_an_inactive_slot_holding_wal_beyond_the_threshold_is_reported(
        pg, ingest_settings, make_app, start_app, unique_name, caplog) -> None:
    idle = f"{unique_name}_idle"
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
    await pg.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (idle,))
    try:
        # WAL written after the slot was created is retained by it until its consumer confirms it.
        await pg.execute("INSERT INTO items SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
        caplog.set_level(logging.WARNING)
        settings = ingest_settings(extra="""
            sources.main.inactive_slot_wal_warning = 64KiB
            sources.main.slot_check_interval = 200ms""")
        running = start_app(make_app(settings))
        await eventually(lambda: idle in running.app.status.inactive_slots, timeout=30,
                         what="the inactive slot reported")
        retained = running.app.status.inactive_slots[idle]
        assert retained > 64 * 1024
        assert unique_name not in running.app.status.inactive_slots, "ingest's own slot is active"
        report = running.app.status.report()["inactive_slots_over_wal_threshold"]
        assert {"slot": idle, "retained_wal_bytes": retained} in report
        gauges = running.app.status.gauges()
        assert gauges["inactive_slots_over_wal_threshold"] >= 1 and gauges["inactive_slot_retained_wal_bytes"] > 0
        assert f"replication slot {idle} is inactive and holds" in caplog.text
        assert f"pg_drop_replication_slot('{idle}')" in caplog.text
        await running.stop_cleanly()
    finally:
        await pg.execute("SELECT pg_drop_replication_slot(%s)", (idle,))
