"""Start-up against real servers: every problem an operator must fix is a typed error saying what to do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from laredo_kernel.changes import TableId
from laredo_testing.eventually import eventually
from laredo_testing.postgres import PostgresServer

from laredo_ingest.domain.errors import (
    MissingReplicationPrivilege,
    PublicationError,
    ReplicationCapacityExhausted,
    SourceUnavailable,
    TableNotFound,
    WalLevelNotLogical,
)

pytestmark = pytest.mark.integration

NO_RETRY = "sources.main.reconnect.max_attempts = 1"


@pytest.fixture(scope="module")
def replica_pg_server() -> Iterator[PostgresServer]:
    """A server that cannot do logical decoding."""
    with PostgresServer({"wal_level": "replica"}) as server:
        yield server


@pytest.fixture(scope="module")
def tight_pg_server() -> Iterator[PostgresServer]:
    """A server with room for one replication slot and one WAL sender."""
    with PostgresServer({"max_replication_slots": 1, "max_wal_senders": 1}) as server:
        yield server


async def run_until_error(app) -> BaseException:
    with pytest.raises(Exception) as info:
        await asyncio.wait_for(app.run(asyncio.Event()), 30)
    return info.value


async def test_wal_level_replica_is_reported_with_the_fix(replica_pg_server, ingest_settings, make_app,
                                                        unique_name) -> None:
    dsn = replica_pg_server.create_database(unique_name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY)")
    error = await run_until_error(make_app(ingest_settings(connection=dsn)))
    assert isinstance(error, WalLevelNotLogical)
    assert "wal_level = 'replica'" in str(error) and "wal_level = logical" in str(error)
    assert f"127.0.0.1:{replica_pg_server.port}/{unique_name}" in str(error)


async def test_missing_table_is_named(pg, ingest_settings, make_app) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY)")
    error = await run_until_error(make_app(ingest_settings(tables=("items", "nope"))))
    assert isinstance(error, TableNotFound)
    assert "public.nope" in str(error) and "public.items" not in str(error)


async def test_role_without_replication_is_reported(pg, pg_dsn, ingest_settings, make_app, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY)")
    await pg.execute(f"CREATE ROLE {unique_name}_app LOGIN NOREPLICATION")
    try:
        error = await run_until_error(make_app(ingest_settings(connection=f"{pg_dsn} user={unique_name}_app")))
        assert isinstance(error, MissingReplicationPrivilege)
        assert f"ALTER ROLE \"{unique_name}_app\" REPLICATION" in str(error)
    finally:
        await pg.execute(f"DROP ROLE {unique_name}_app")


async def test_unreachable_server_names_host_port_and_database_but_not_the_password(ingest_settings, make_app) -> None:
    dsn = "host=127.0.0.1 port=1 dbname=laredo user=app password=sekrit connect_timeout=2"
    error = await run_until_error(make_app(ingest_settings(connection=dsn, extra=f"{NO_RETRY}")))
    assert isinstance(error, SourceUnavailable) and error.retryable
    assert "127.0.0.1:1/laredo" in str(error) and "sekrit" not in str(error)


async def test_unmanaged_publication_must_exist(pg, ingest_settings, make_app) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY)")
    error = await run_until_error(make_app(ingest_settings(
        extra="sources.main.publication.create = false")))
    assert isinstance(error, PublicationError) and "CREATE PUBLICATION" in str(error)


async def test_managed_publication_follows_the_configured_tables(pg, ingest_settings, make_app, start_app,
                                                                 unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY)")
    await pg.execute("CREATE TABLE extra (id int PRIMARY KEY)")
    await pg.execute(f"CREATE PUBLICATION {unique_name}_pub FOR TABLE extra")
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="ingest ready")
    cur = await pg.execute("SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
                           (f"{unique_name}_pub",))
    assert [TableId(*row) for row in await cur.fetchall()] == [TableId("public", "items")]
    await running.stop_cleanly()


async def test_full_replication_slots_and_wal_senders_are_reported_with_the_fix(
        tight_pg_server, ingest_settings, make_app, unique_name) -> None:
    dsn = tight_pg_server.create_database(unique_name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY)")
        conn.execute("SELECT pg_create_logical_replication_slot('someone_else', 'pgoutput')")
        try:
            error = await run_until_error(make_app(ingest_settings(connection=dsn, extra=NO_RETRY)))
            assert isinstance(error, ReplicationCapacityExhausted) and error.retryable
            assert "max_replication_slots = 1 and all are in use (someone_else)" in str(error)
            assert "pg_drop_replication_slot" in str(error)
        finally:
            conn.execute("SELECT pg_drop_replication_slot('someone_else')")
        with psycopg.connect(dsn, replication="database", autocommit=True):  # takes the only WAL sender
            error = await run_until_error(make_app(ingest_settings(connection=dsn, extra=NO_RETRY)))
        assert isinstance(error, ReplicationCapacityExhausted)
        assert "max_wal_senders = 1 and 1 replication connection(s) already" in str(error)
    tight_pg_server.drop_database(unique_name)
