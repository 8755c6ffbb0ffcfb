"""Schema changes mid-stream, TRUNCATE, and publications with column lists and row filters (PostgreSQL 15)."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_testing.eventually import eventually

from laredo_ingest.application.status import IngestPhase

from services.ingest.tests.stream_replica import StreamReplica, assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

ITEMS = TableId("public", "items")


async def _transactions(nats_url: str, prefix: str, count: int) -> bool:
    messages = await read_stream(nats_url, prefix)
    return len({m.batch.commit_lsn for m in messages if m.batch.kind is BatchKind.TRANSACTION}) >= count


async def test_column_changes_become_schema_change_events_and_truncate_propagates(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'one')")
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    for statement in ("ALTER TABLE items ADD COLUMN age int", "INSERT INTO items VALUES (2, 'two', 20)",
                      "CREATE TYPE mood AS ENUM ('sad', 'happy')", "CREATE DOMAIN small AS int2 CHECK (VALUE < 100)",
                      "ALTER TABLE items DROP COLUMN name, ADD COLUMN feeling mood, ADD COLUMN level small",
                      "INSERT INTO items VALUES (3, 30, 'happy', 7)", "ALTER TABLE items ALTER COLUMN age TYPE bigint",
                      "UPDATE items SET age = 4000000000 WHERE id = 3"):
        await pg.execute(statement)
    # Existing rows changed without row changes in the WAL (new columns, a type change): the table is
    # re-baselined after each schema change, so the replica ends equal to the table.
    async def settled() -> StreamReplica | None:
        replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
        return replica if len(replica.tables[ITEMS].schema_changes) == 3 else None

    replica = await eventually(settled, timeout=30, what="three schema changes and the replica equal to the table")
    assert replica.tables[ITEMS].baselines >= 2
    events = replica.tables[ITEMS].schema_changes
    assert [e.reason for e in events] == ["added age", "added feeling, level; dropped name",
                                          "column types, key or replica identity changed"]
    assert [c.name for c in events[0].old_columns] == ["id", "name"]
    assert [c.name for c in events[0].columns] == ["id", "name", "age"]
    assert [(c.name, c.type_name) for c in events[2].columns] == [("id", "int4"), ("age", "int8"),
                                                                  ("feeling", "mood"), ("level", "small")]
    assert replica.rows(ITEMS)[(3,)] == {"id": 3, "age": 4_000_000_000, "feeling": "happy", "level": 7}
    # The schema changes queued re-baselines; one still to come would cover the TRUNCATE (its snapshot would
    # hold the table after it) and leave no TRUNCATE in the stream.
    status, control = running.app.status, running.app.control
    await eventually(lambda: status.phase is IngestPhase.STREAMING and not control.wakeup.is_set(),
                     timeout=30, what="the queued re-baselines done")
    await pg.execute("TRUNCATE items")
    await pg.execute("INSERT INTO items (id, age) VALUES (9, 9)")
    replica = await eventually(lambda: _only_row_9(nats_url, unique_name), timeout=30, what="the truncate")
    await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    assert any(c.action.value == "TRUNCATE" for m in await read_stream(nats_url, unique_name)
               for c in m.batch.changes)
    await running.stop_cleanly()


async def _only_row_9(nats_url: str, prefix: str) -> StreamReplica | None:
    replica = StreamReplica(await read_stream(nats_url, prefix))
    return replica if list(replica.rows(ITEMS)) == [(9,)] else None


async def _identity_covering_qty(pg) -> None:
    """PostgreSQL 15 refuses UPDATE/DELETE when a row filter uses columns outside the replica identity."""
    await pg.execute("CREATE UNIQUE INDEX items_id_qty ON items (id, qty)")
    await pg.execute("ALTER TABLE items REPLICA IDENTITY USING INDEX items_id_qty")


async def test_a_managed_publication_with_a_column_list_and_row_filter(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, qty int NOT NULL, secret text)")
    await _identity_covering_qty(pg)
    await pg.execute("INSERT INTO items SELECT i, i, 'hidden' FROM generate_series(1, 30) i")
    settings = ingest_settings(extra="""
        sources.main.publication.row_filters { "public.items" = "qty > 10" }
        sources.main.publication.column_lists { "public.items" = [id, qty] }""")
    running = start_app(make_app(settings))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    cur = await pg.execute("SELECT attnames::text[], rowfilter FROM pg_publication_tables WHERE pubname = %s",
                           (f"{unique_name}_pub",))
    assert await cur.fetchone() == (["id", "qty"], "(qty > 10)")
    await pg.execute("INSERT INTO items VALUES (100, 5, 'x'), (101, 50, 'x')")
    await pg.execute("UPDATE items SET qty = 1 WHERE id = 20")  # leaves the filter: a delete downstream
    await pg.execute("UPDATE items SET qty = 99 WHERE id = 3")  # enters the filter: an insert downstream
    await pg.execute("UPDATE items SET secret = 'still hidden' WHERE id = 25")
    await eventually(lambda: _transactions(nats_url, unique_name, 4), timeout=30, what="the changes")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS, where="qty > 10")
    assert set(replica.tables[ITEMS].rows[(3,)]) == {"id", "qty"}
    assert (20,) not in replica.rows(ITEMS) and (101,) in replica.rows(ITEMS) and (100,) not in replica.rows(ITEMS)
    await running.stop_cleanly()
    # A changed filter changes what downstream must hold: the next start takes a new baseline.
    second = start_app(make_app(ingest_settings(extra="""
        sources.main.publication.row_filters { "public.items" = "qty > 20" }
        sources.main.publication.column_lists { "public.items" = [id, qty] }""")))
    await eventually(lambda: second.app.status.ready, timeout=30, what="second baseline")
    messages = await read_stream(nats_url, unique_name)
    assert [m.batch.kind for m in messages].count(BatchKind.BASELINE_END) == 2
    await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS, where="qty > 20")
    await second.stop_cleanly()


async def test_an_existing_publication_is_used_as_is_with_its_filter(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, qty int NOT NULL, note text)")
    await _identity_covering_qty(pg)
    await pg.execute("INSERT INTO items SELECT i, i, 'n' FROM generate_series(1, 10) i")
    await pg.execute(f"CREATE PUBLICATION {unique_name}_pub FOR TABLE items (id, qty) WHERE (qty % 2 = 0)")
    running = start_app(make_app(ingest_settings(extra="sources.main.publication.create = false")))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    await pg.execute("INSERT INTO items VALUES (11, 11, 'odd'), (12, 12, 'even')")
    await eventually(lambda: _transactions(nats_url, unique_name, 1), timeout=30, what="the insert")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS, where="qty % 2 = 0")
    assert sorted(k[0] for k in replica.rows(ITEMS)) == [2, 4, 6, 8, 10, 12]
    await running.stop_cleanly()
