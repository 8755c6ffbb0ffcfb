"""Exact values end to end: numeric, money, interval and int8 beyond 2**53 reach clients as PostgreSQL writes them.

A table of such values on a real PostgreSQL goes through ingest (baseline and stream) to fan-out and query
(processes). The client library's replica, a client bootstrapped from a fan-out snapshot (Parquet parts), a
client restored from its local snapshot file, and the query service's ListRows must all hold PostgreSQL's own
text for every numeric (0.0000001, never 1E-7 or a float), money and interval, and every int8 exactly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from google.protobuf.json_format import MessageToDict

from laredo.v1 import oam_pb2, query_pb2
from laredo_client import LaredoClient
from laredo_kernel.changes import TableId
from laredo_kernel.pgtext import SESSION_SETTINGS
from laredo_testing.eventually import eventually

from tests.e2e.system import System, SystemConfig, running_system

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLUMNS = "id, n, n5, m, iv, big, nums, bigs"
#: (n, n5, m, iv, big, nums, bigs) as SQL literals; PostgreSQL decides their text.
VALUES = [
    ("0.0000001", "1.5", "1234.56", "'1 year 2 months 3 days 04:05:06.789'", "9007199254740993",
     "ARRAY[0.0000001, NULL, 1e-20]", "ARRAY[9007199254740993, 1, NULL]"),
    ("1e-20", "0.00001", "-0.01", "'-1 day +00:00:00.000001'", "-9223372036854775808", "'{}'", "ARRAY[-1]"),
    ("123456789012345678901234567890.123456789", "-0.00", "0", "'0'", "9223372036854775807",
     "ARRAY['NaN'::numeric, 'Infinity', '-Infinity']", "'{}'"),
    ("-0.00", "99999999999999.99999", "92233720368547758.07", "'178000000 years'", "0", "ARRAY[-0.00]", "NULL"),
    ("'NaN'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"),
    ("1e100", "0", "1", "'1 mon'", "1", "ARRAY[1e100]", "ARRAY[1]"),
    ("1e-100", "0", "1", "'1 mon'", "1", "ARRAY[1e-100]", "ARRAY[1]"),
    ("'Infinity'", "1", "1", "'1 mon'", "1", "ARRAY[1.10]", "ARRAY[1]"),
    ("'-Infinity'", "1", "1", "'1 mon'", "1", "ARRAY[1.000]", "ARRAY[1]"),
    ("NULL", "1", "1", "'1 mon'", "1", "NULL", "ARRAY[1]"),
]


def insert(dsn: str, table: TableId, first_id: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for offset, literals in enumerate(VALUES):
            conn.execute(f"INSERT INTO {table} ({COLUMNS}) VALUES ({first_id + offset}, {', '.join(literals)})")


def expected_rows(dsn: str, table: TableId) -> dict[int, dict[str, Any]]:
    """Every row as PostgreSQL writes it under the session settings ingest uses: numeric, money and interval
    as their text, int8 as exact ints, arrays element by element."""
    options = " ".join(f"-c {name}={value.replace(' ', '')}" for name, value in SESSION_SETTINGS.items())
    with psycopg.connect(dsn, options=options) as conn:
        rows = conn.execute(f"SELECT id, n::text, n5::text, m::text, iv::text, big, nums::text[], bigs "
                            f"FROM {table}").fetchall()
    names = COLUMNS.split(", ")
    return {row[0]: dict(zip(names, row, strict=True)) for row in rows}


@pytest.fixture
def system(pg_dsn: str, nats_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, n numeric, n5 numeric(20,5), m money, "
                     "iv interval, big bigint, nums numeric[], bigs bigint[])")
    insert(pg_dsn, table, 1)  # the baseline
    store = json.dumps(str(tmp_path / "snapshots"))
    config = SystemConfig(fanout_target=f"snapshot {{ interval = 0s, store = local, store_config {{ path = {store} }}, "
                                        "serializer = parquet }")
    with running_system(pg_dsn, nats_url, unique_name, table, tmp_path, redis_url=redis_url,
                        config=config) as running:
        yield running


async def query_rows(system: System) -> dict[int, dict[str, Any]]:
    reply = await system.query("ListRows", query_pb2.ListRowsRequest(schema=system.table.schema,
                                                                     table=system.table.name, page_size=1000))
    return {int(row["id"]): row for row in map(MessageToDict, reply.rows)}


def as_struct(row: dict[str, Any]) -> dict[str, Any]:
    """A row as google.protobuf.Struct (query) carries it: numbers are doubles, int8 beyond 2**53 a decimal
    string; every text form as it is."""
    def value(v: Any) -> Any:
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, int):
            return float(v) if abs(v) <= 2**53 else str(v)
        return v

    return {name: value(v) for name, v in row.items()}


async def test_exact_types_come_back_as_postgresql_writes_them(system: System, tmp_path: Path) -> None:
    address, table = f"127.0.0.1:{system.ports['fanout']}", system.table
    local = tmp_path / "client.json"
    async with LaredoClient(address, table.schema, table.name, local_snapshot_path=local) as client:
        await client.await_ready(60)
        insert(system.dsn, table, 101)  # the stream
        system.sql(f"UPDATE {table} SET n = 0.000000000000000000000000000001, nums = ARRAY[0.0000001] WHERE id = 2")
        expected = await asyncio.to_thread(expected_rows, system.dsn, table)
        assert expected[1]["n"] == "0.0000001" and expected[2]["n"] == "0." + "0" * 29 + "1"  # PostgreSQL's text

        await eventually(lambda: client_rows(client) == expected, timeout=60,
                         what="the client library's replica to hold PostgreSQL's text of every value")
        await eventually(lambda: _query_equals(system, expected), timeout=60,
                         what="the query service to answer PostgreSQL's text of every value")
        await client.save_local_snapshot()

    reply = await system.oam("CreateSnapshot", oam_pb2.CreateSnapshotRequest(tables=[str(table)]))
    assert reply.accepted, reply.message
    async with LaredoClient(address, table.schema, table.name, bootstrap_from_server_snapshot=True) as booted:
        await booted.await_ready(60)
        assert booted.stats.server_snapshot_id, "the client should have started from the fan-out snapshot"
        assert client_rows(booted) == expected
    restored = LaredoClient(address, table.schema, table.name, local_snapshot_path=local)
    await restored.start()
    try:
        assert restored.stats.restored_from_local and client_rows(restored) == expected  # the file, not the server
    finally:
        await restored.stop()


def client_rows(client: LaredoClient) -> dict[int, dict[str, Any]]:
    return {row["id"]: row for row in client.all()}


async def _query_equals(system: System, expected: dict[int, dict[str, Any]]) -> bool:
    return await query_rows(system) == {k: as_struct(v) for k, v in expected.items()}
