"""Values and keys against real PostgreSQL and NATS: the type matrix, TOAST, replica identities, keyless tables."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal

import pytest

from laredo_kernel.changes import Action, BatchKind, TableId
from laredo_kernel.tuples import UNCHANGED
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

MATRIX = TableId("public", "matrix")
TYPES_DDL = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE DOMAIN label AS varchar(10);
CREATE TABLE matrix (
  id int PRIMARY KEY, b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric, n2 numeric(12,4),
  t text, vc varchar(20), c char(5), by bytea, j json, jb jsonb, u uuid, d date, tm time, ttz timetz,
  ts timestamp, tstz timestamptz, iv interval, a_i4 int4[], a_t text[], a_n numeric[], a_b bool[],
  a_tstz timestamptz[], a_u uuid[], a_jb jsonb[], m mood, a_m mood[], p posint, l label, a_p posint[])
"""
VALUES = [
    """(1, true, -32768, 2147483647, -9223372036854775808, 1.5, 3.141592653589793, 12345678901234567890.123456789012,
        -1.2345, 'plain text ünïcode ☃', 'varchar', 'ab', '\\x00ff10', '{"a": [1, 2.5, null]}',
        '{"nested": {"k": "v"}, "n": 1e3}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '23:59:59.999999',
        '12:00:00+05:30', '2024-01-02 03:04:05.678901', '2024-06-30 23:59:60+02', 'P1Y2M3DT4H5M6.5S',
        '{1,NULL,-3}', '{"a,b","quote\\"d",NULL,"",back\\\\slash}', '{1.10,-0.5}', '{t,f,NULL}',
        '{"2024-01-01 00:00:00+00"}', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', ARRAY['{"x": 1}'::jsonb],
        'happy', '{sad,ok}', 42, 'lbl', '{1,2}')""",
    "(2, " + ", ".join(["NULL"] * 33) + ")",
    """(3, false, 0, 0, 0, 'Infinity', '-Infinity', 0.000000000000000000001, 0, '', '', '', '', 'null', '[]',
        '00000000-0000-0000-0000-000000000000', 'infinity', '00:00:00', '00:00:00-12', '-infinity',
        '1970-01-01 00:00:00+00', '-1 day -00:00:01', '{}', '{}', '{}', '{}', '{}', '{}', '{}', 'sad', '{}', 1, '',
        '{}')""",
]
COLUMNS = ("b, i2, i4, i8, f4, f8, n, n2, t, vc, c, by, j, jb, u, d, tm, ttz, ts, tstz, iv, a_i4, a_t, a_n, a_b, "
           "a_tstz, a_u, a_jb, m, a_m, p, l, a_p")


def without_id(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "id"}


async def test_every_type_is_typed_identically_in_baseline_and_stream(pg, pg_dsn, ingest_settings, make_app,
                                                                      start_app, nats_url, unique_name) -> None:
    await pg.execute(TYPES_DDL)
    await pg.execute(f"INSERT INTO matrix VALUES {', '.join(VALUES)}")
    running = start_app(make_app(ingest_settings(tables=("matrix",))))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    # The same values again through the stream: inserted, then updated onto other rows' values, then deleted.
    await pg.execute(f"INSERT INTO matrix (id, {COLUMNS}) SELECT id + 10, {COLUMNS} FROM matrix WHERE id <= 3")
    await pg.execute(f"INSERT INTO matrix (id, {COLUMNS}) SELECT id + 20, {COLUMNS} FROM matrix WHERE id <= 3")
    await pg.execute(f"UPDATE matrix AS m SET ({COLUMNS}) = (SELECT {COLUMNS} FROM matrix WHERE id = 3) "
                     "WHERE m.id IN (21, 22)")
    await pg.execute(f"UPDATE matrix AS m SET ({COLUMNS}) = (SELECT {COLUMNS} FROM matrix WHERE id = 1) "
                     "WHERE m.id = 23")
    await pg.execute("DELETE FROM matrix WHERE id = 12")
    await eventually(lambda: _streamed(nats_url, unique_name, 5), timeout=30, what="the five transactions")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, MATRIX)
    assert replica.tables[MATRIX].schema_changes == [], "the catalog and the Relation message disagree"
    rows = replica.rows(MATRIX)
    baseline = {key[0]: row for key, row in rows.items() if key[0] <= 3}
    assert without_id(rows[(11,)]) == without_id(baseline[1]) and without_id(rows[(13,)]) == without_id(baseline[3])
    assert without_id(rows[(21,)]) == without_id(rows[(22,)]) == without_id(baseline[3])
    assert without_id(rows[(23,)]) == without_id(baseline[1]) and (12,) not in rows
    assert all(v is None for v in without_id(baseline[2]).values())
    one = baseline[1]
    assert one["n"] == Decimal("12345678901234567890.123456789012") and one["n2"] == Decimal("-1.2345")
    assert one["i8"] == -9223372036854775808 and one["f8"] == 3.141592653589793 and one["b"] is True
    assert one["by"] == b"\x00\xff\x10" and one["jb"] == {"nested": {"k": "v"}, "n": 1000}
    assert one["j"] == {"a": [1, 2.5, None]} and one["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert one["tstz"] == dt.datetime(2024, 6, 30, 22, 0, tzinfo=dt.UTC)  # a leap second normalised
    assert one["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 678901) and one["d"] == dt.date(2024, 2, 29)
    assert one["a_t"] == ["a,b", 'quote"d', None, "", "back\\slash"] and one["a_i4"] == [1, None, -3]
    assert one["m"] == "happy" and one["a_m"] == ["sad", "ok"] and one["p"] == 42 and one["a_p"] == [1, 2]
    assert one["c"] == "ab   " and one["ttz"] == dt.time(12, 0, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert baseline[3]["d"] == "infinity" and baseline[3]["f4"] == float("inf")
    await running.stop_cleanly()


async def _streamed(nats_url: str, prefix: str, transactions: int) -> bool:
    messages = await read_stream(nats_url, prefix)
    return len({m.batch.commit_lsn for m in messages if m.batch.kind is BatchKind.TRANSACTION}) >= transactions


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
async def test_an_unchanged_toast_value_survives_an_update_of_another_column(
        identity, pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE docs (id int PRIMARY KEY, qty int, body text)")
    await pg.execute(f"ALTER TABLE docs REPLICA IDENTITY {identity}")
    await pg.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")  # out of line, uncompressed
    big = "".join(f"{i:08x}" for i in range(12_800))  # 100 kB
    await pg.execute("INSERT INTO docs VALUES (1, 0, %s), (2, 0, %s)", (big, big))
    running = start_app(make_app(ingest_settings(tables=("docs",))))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    await pg.execute("INSERT INTO docs VALUES (3, 0, %s)", (big,))
    await pg.execute("UPDATE docs SET qty = qty + 1")  # every body unchanged: TOASTed, so not sent again
    await pg.execute("UPDATE docs SET body = NULL, qty = 5 WHERE id = 2")  # NULL is not "unchanged"
    await eventually(lambda: _streamed(nats_url, unique_name, 3), timeout=30, what="the three transactions")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, TableId("public", "docs"))
    rows = replica.rows(TableId("public", "docs"))
    assert rows[(1,)] == {"id": 1, "qty": 1, "body": big} and rows[(3,)]["body"] == big
    assert rows[(2,)] == {"id": 2, "qty": 5, "body": None}
    updates = [c for m in await read_stream(nats_url, unique_name) if m.batch.kind is BatchKind.TRANSACTION
               for c in m.batch.changes if c.action is Action.UPDATE and c.new["qty"] == 1]
    bodies = {c.new["body"] is UNCHANGED for c in updates}
    assert bodies == ({True} if identity == "DEFAULT" else {False})  # FULL: filled in from the old row
    await running.stop_cleanly()


async def test_replica_identities_key_changes_and_tables_without_a_usable_key(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name, caplog) -> None:
    await pg.execute("""
        CREATE TABLE by_pk (id int PRIMARY KEY, v text);
        CREATE TABLE by_full (a int, b text);
        ALTER TABLE by_full REPLICA IDENTITY FULL;
        CREATE TABLE by_index (code text NOT NULL, v text);
        CREATE UNIQUE INDEX by_index_code ON by_index (code);
        ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_code;
        CREATE TABLE keyless (v text);
        CREATE TABLE nothing (id int PRIMARY KEY, v text);
        ALTER TABLE nothing REPLICA IDENTITY NOTHING;
        INSERT INTO by_pk VALUES (1, 'one'), (2, 'two');
        INSERT INTO by_full VALUES (1, 'x'), (2, 'y');
        INSERT INTO by_index VALUES ('A', 'a'), ('B', 'b');
        INSERT INTO keyless VALUES ('k1');
        INSERT INTO nothing VALUES (1, 'n1');
    """)
    tables = ("by_pk", "by_full", "by_index", "keyless", "nothing")
    running = start_app(make_app(ingest_settings(tables=tables)))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    assert set(running.app.status.keyless_tables) == {"public.keyless", "public.nothing"}
    assert "public.keyless has no primary key and REPLICA IDENTITY DEFAULT" in caplog.text
    await pg.execute("""
        UPDATE by_pk SET id = 10, v = 'moved' WHERE id = 1;
        DELETE FROM by_pk WHERE id = 2;
        UPDATE by_full SET b = 'z' WHERE a = 1;
        DELETE FROM by_full WHERE a = 2;
        UPDATE by_index SET code = 'C' WHERE code = 'A';
        DELETE FROM by_index WHERE code = 'B';
        INSERT INTO keyless VALUES ('k2');
        INSERT INTO nothing VALUES (2, 'n2');
    """)
    await eventually(lambda: _streamed(nats_url, unique_name, 1), timeout=30, what="the changes")
    for name in ("by_pk", "by_full", "by_index"):
        replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, TableId("public", name))
        assert replica.tables[TableId("public", name)].schema_changes == []
    assert replica.rows(TableId("public", "by_pk")) == {(10,): {"id": 10, "v": "moved"}}
    assert list(replica.rows(TableId("public", "by_index"))) == [("C",)]
    assert TableId("public", "keyless") not in replica.tables and TableId("public", "nothing") not in replica.tables
    assert not replica.deadletter, "tables without a usable key are refused: not published at all"
    await pg.execute("UPDATE keyless SET v = 'kept'")  # not in the publication: the application's writes work
    await running.stop_cleanly()


async def test_keyless_tables_can_be_refused_at_start_up(pg, ingest_settings, make_app) -> None:
    await pg.execute("CREATE TABLE items (v text)")
    app = make_app(ingest_settings(extra="sources.main.keyless_tables = fail"))
    with pytest.raises(Exception, match="public.items has no primary key"):
        await app.run(asyncio.Event())
