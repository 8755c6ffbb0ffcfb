"""Catalog resolution on real PostgreSQL: composite keys, enums, domains, arrays, identities; stream agrees."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import BatchKind, ColumnInfo, TableId
from laredo_core.stream.codec import typed_row
from laredo_testing.eventually import eventually

from laredo_ingest.adapters.psycopg_source_database import PsycopgSourceDatabase
from laredo_ingest.domain.schema import ReplicaIdentity

pytestmark = pytest.mark.integration

SETUP = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE DOMAIN small_posint AS posint CHECK (VALUE < 100);
CREATE TABLE items (region text, id int, feeling mood, feelings mood[], level small_posint, levels small_posint[],
                    note varchar(20), dropped int, doubled int GENERATED ALWAYS AS (id * 2) STORED,
                    PRIMARY KEY (id, region));
ALTER TABLE items DROP COLUMN dropped;
ALTER TABLE items REPLICA IDENTITY FULL;
INSERT INTO items VALUES ('eu', 1, 'ok', '{sad,happy}', 5, '{1,2}', 'x');
"""


async def test_columns_resolve_through_enums_domains_and_arrays(pg, pg_dsn) -> None:
    await pg.execute(SETUP)
    db = PsycopgSourceDatabase(pg_dsn)
    await db.open()
    try:
        schema = (await db.describe_tables([TableId("public", "items")]))[TableId("public", "items")]
    finally:
        await db.close()
    cur = await pg.execute("SELECT 'mood'::regtype::oid, '_mood'::regtype::oid, 'small_posint'::regtype::oid, "
                           "'_small_posint'::regtype::oid")
    mood, moods, level, levels = await cur.fetchone()
    assert schema.replica_identity is ReplicaIdentity.FULL
    assert schema.columns == (
        ColumnInfo("region", 25, "text", -1, True, True, 2),
        ColumnInfo("id", 23, "int4", -1, True, True, 1),
        ColumnInfo("feeling", mood, "mood", -1, True, False, 0, 25),
        ColumnInfo("feelings", moods, "_mood", -1, True, False, 0, 25),
        ColumnInfo("level", level, "small_posint", -1, True, False, 0, 23),
        ColumnInfo("levels", levels, "_small_posint", -1, True, False, 0, 23),
        ColumnInfo("note", 1043, "varchar", 24, True, False, 0),
    )


async def test_stream_rows_type_like_baseline_rows(pg, make_app, read_stream, start_app) -> None:
    await pg.execute(SETUP)
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="ingest ready")
    await pg.execute("UPDATE items SET level = 7, feelings = '{ok}' WHERE id = 1")

    async def update_stored() -> list:
        stored = await read_stream()
        return stored if any(m.batch.kind is BatchKind.TRANSACTION for m in stored) else []

    stored = await eventually(update_stored, timeout=30, what="the update in the stream")
    baseline_row = next(m for m in stored if m.batch.kind is BatchKind.BASELINE_ROWS).batch.changes[0].new
    update = next(m for m in stored if m.batch.kind is BatchKind.TRANSACTION).batch.changes[0]
    assert baseline_row == {"region": "eu", "id": 1, "feeling": "ok", "feelings": ["sad", "happy"], "level": 5,
                            "levels": [1, 2], "note": "x"}
    assert update.old == baseline_row  # REPLICA IDENTITY FULL: the whole old row, typed the same way
    assert update.new == {**baseline_row, "level": 7, "feelings": ["ok"]}
    assert typed_row(stored[0].batch.columns, [b"us", b"2", b"sad", b"{}", b"9", b"{}", b"y"])["level"] == 9
    await running.stop_cleanly()
