"""SourceDatabase and ReplicationStream contracts, run against the in-memory source and real PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.tuples import decode_tuple_exact, encode_tuple
from laredo_testing.eventually import eventually

from laredo_ingest.adapters.memory import MemoryReplicationStream, MemorySource, MemorySourceDatabase, WalBuilder
from laredo_ingest.adapters.psycopg_replication_stream import PsycopgReplicationStream
from laredo_ingest.adapters.psycopg_source_database import PsycopgSourceDatabase
from laredo_ingest.domain.pgoutput import Commit, Insert, Relation, decode_message
from laredo_ingest.domain.prerequisites import PublicationChange, PublishedTableSpec
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema
from laredo_ingest.domain.walproto import PRIMARY_KEEPALIVE, XLOG_DATA, XLOG_DATA_HEADER_SIZE

ITEMS = TableId("public", "items")
EXTRA = TableId("public", "extra")
ITEMS_COLUMNS = (ColumnInfo("id", 23, "int4", -1, True, True, 1), ColumnInfo("name", 25, "text", -1, False, True, 0),
                 ColumnInfo("tags", 1009, "_text", -1, False, False, 0, 25))
ROWS = [[b"1", b"one", b"{a,b}"], [b"2", b"two", None], [b"3", b"tab\there", b"{}"]]


@dataclasses.dataclass
class SourceHarness:
    database: Any
    new_stream: Callable[[], Any]
    insert: Callable[[int, str], Awaitable[None]]
    relation_id: int


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.integration)])
async def source(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[SourceHarness]:
    if request.param == "memory":
        world = MemorySource(database=unique_name)
        items = TableSchema(ITEMS, 16385, ITEMS_COLUMNS, ReplicaIdentity.DEFAULT)
        world.add_table(items, ROWS)
        world.add_table(TableSchema(EXTRA, 16390, (ColumnInfo("id", 23, "int4"),), ReplicaIdentity.DEFAULT))

        async def insert_in_memory(row_id: int, name: str) -> None:
            world.commit([WalBuilder.relation(items), WalBuilder.insert(16385, [str(row_id).encode(), name.encode(),
                                                                               None])])

        yield SourceHarness(MemorySourceDatabase(world), lambda: MemoryReplicationStream(world), insert_in_memory,
                            16385)
        return
    dsn = request.getfixturevalue("pg_dsn")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, tags text[])")
        await conn.execute("CREATE TABLE extra (id int)")
        await conn.execute("INSERT INTO items VALUES (1, 'one', '{a,b}'), (2, 'two', NULL), (3, E'tab\\there', '{}')")
        cur = await conn.execute("SELECT 'items'::regclass::oid")
        relation_id = (await cur.fetchone())[0]

        async def insert_in_postgres(row_id: int, name: str) -> None:
            await conn.execute("INSERT INTO items (id, name) VALUES (%s, %s)", (row_id, name))

        yield SourceHarness(PsycopgSourceDatabase(dsn), lambda: PsycopgReplicationStream(dsn), insert_in_postgres,
                            relation_id)


async def test_describe_tables_gives_columns_keys_and_identity_and_omits_missing(source: SourceHarness) -> None:
    db = source.database
    await db.open()
    try:
        schemas = await db.describe_tables([ITEMS, TableId("public", "missing")])
        assert list(schemas) == [ITEMS]
        assert schemas[ITEMS].columns == ITEMS_COLUMNS
        assert schemas[ITEMS].replica_identity is ReplicaIdentity.DEFAULT
        assert schemas[ITEMS].relation_id == source.relation_id
        facts = await db.server_facts()
        assert facts.wal_level == "logical" and (facts.is_superuser or facts.has_replication)
    finally:
        await db.close()


async def test_publication_is_created_altered_and_read_back(source: SourceHarness, unique_name: str) -> None:
    db = source.database
    await db.open()
    try:
        assert await db.publication(unique_name) is None
        await db.change_publication(unique_name, PublicationChange(create=True, add=(ITEMS,)))
        assert (await db.publication(unique_name)).tables == {ITEMS}
        await db.change_publication(unique_name, PublicationChange(add=(EXTRA,), drop=(ITEMS,)))
        state = await db.publication(unique_name)
        assert state.tables == {EXTRA} and not state.all_tables
        assert not state.details[EXTRA].has_column_list and not state.details[EXTRA].row_filter
        await db.drop_publication(unique_name)
        assert await db.publication(unique_name) is None
    finally:
        await db.close()


async def test_column_lists_and_row_filters_are_set_and_read_back(source: SourceHarness, unique_name: str) -> None:
    db = source.database
    await db.open()
    try:
        restricted = PublishedTableSpec(ITEMS, ("id", "name"), "id > 1")
        await db.change_publication(unique_name, PublicationChange(create=True, add=(ITEMS,),
                                                                   set_tables=(restricted,)))
        published = (await db.publication(unique_name)).details[ITEMS]
        assert published.has_column_list and published.columns == ("id", "name")
        assert published.row_filter.replace("(", "").replace(")", "") == "id > 1"
        assert published.fingerprint.startswith("public.items (id,name) WHERE ")
        await db.change_publication(unique_name, PublicationChange(set_tables=(PublishedTableSpec(ITEMS),
                                                                               PublishedTableSpec(EXTRA))))
        state = await db.publication(unique_name)
        assert state.tables == {ITEMS, EXTRA}
        assert not state.details[ITEMS].has_column_list and not state.details[ITEMS].row_filter
    finally:
        await db.close()


async def test_positions_and_estimates(source: SourceHarness) -> None:
    db = source.database
    await db.open()
    try:
        assert await db.current_wal_lsn() > 0
        assert set(await db.row_estimates([ITEMS])) <= {ITEMS}
    finally:
        await db.close()


async def test_slot_snapshot_stream_and_confirmation(source: SourceHarness, unique_name: str) -> None:
    db, stream = source.database, source.new_stream()
    await db.open()
    try:
        await db.change_publication(unique_name, PublicationChange(create=True, add=(ITEMS,)))
        identity = await stream.open()
        assert identity.database == unique_name and identity.system_identifier
        assert await db.slot(unique_name) is None
        created = await stream.create_slot(unique_name, temporary=False)
        schema = (await db.describe_tables([ITEMS]))[ITEMS]
        async with db.snapshot(created.snapshot_name) as reader:
            chunks = [chunk async for chunk in reader.copy_rows(schema, "", 2)]
            by_bytes = [chunk async for chunk in reader.copy_rows(schema, "", 100, chunk_bytes=1)]
        assert [len(c) for c in chunks] == [2, 1] and [len(c) for c in by_bytes] == [1, 1, 1]
        assert [decode_tuple_exact(t) for c in chunks for t in c] == ROWS
        slot = await db.slot(unique_name)
        assert slot.plugin == "pgoutput" and not slot.temporary and slot.database == unique_name

        await stream.start(unique_name, created.consistent_lsn, unique_name, protocol_version=2, streaming=True)
        await source.insert(10, "ten")
        insert, commit = await _read_transaction(stream)
        assert insert.relation_id == source.relation_id
        assert insert.new_tuple == encode_tuple([b"10", b"ten", None])
        await stream.send_status(commit.end_lsn, commit.end_lsn, commit.end_lsn)
        await eventually(lambda: _confirmed(db, unique_name, commit.end_lsn), what="slot confirmed at the commit")
        await stream.stop()
    finally:
        await stream.close()
    try:
        assert not (await db.slot(unique_name)).active
        assert unique_name in {s.slot_name for s in await db.inactive_slots()}
        await db.drop_slot(unique_name)
        assert await db.slot(unique_name) is None
        await db.drop_slot(unique_name)  # dropping a missing slot is fine
    finally:
        await db.close()


async def test_a_temporary_slot_disappears_with_its_connection(source: SourceHarness, unique_name: str) -> None:
    db, stream = source.database, source.new_stream()
    await db.open()
    try:
        await stream.open()
        await stream.create_slot(unique_name, temporary=True)
        assert (await db.slot(unique_name)).temporary
        await stream.close()
        await eventually(lambda: _slot_gone(db, unique_name), what="temporary slot dropped")
    finally:
        await stream.close()
        await db.close()


async def _read_transaction(stream: Any) -> tuple[Insert, Commit]:
    insert = None
    while True:
        for frame in await stream.read_frames(100):
            if frame[0] == PRIMARY_KEEPALIVE:
                continue
            assert frame[0] == XLOG_DATA
            message = decode_message(frame, XLOG_DATA_HEADER_SIZE)
            if isinstance(message, Insert):
                insert = message
            elif isinstance(message, Commit):
                assert insert is not None
                return insert, message
            else:
                assert type(message).__name__ in ("Begin", "Relation", "TypeMessage"), message
                if isinstance(message, Relation):
                    assert [c.name for c in message.columns] == ["id", "name", "tags"]


async def _confirmed(db: Any, slot: str, lsn: int) -> bool:
    info = await db.slot(slot)
    return info is not None and info.confirmed_flush_lsn == lsn


async def _slot_gone(db: Any, slot: str) -> bool:
    return await db.slot(slot) is None
