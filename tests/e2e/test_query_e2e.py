"""PostgreSQL -> ingest -> JetStream -> query: every Query RPC and its error codes, on real servers.

`laredo-ingest` and `laredo-query` run as processes (tests/e2e/harness.py) on a throwaway PostgreSQL and
NATS; the test changes tables with SQL and reads them back through both service names.
"""

from __future__ import annotations

import asyncio
import json
import random
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from laredo.v1 import query_pb2 as pb
from laredo.v1 import query_pb2_grpc
from laredo_kernel.jsonvalue import row_to_json
from laredo_testing.eventually import eventually

from laredo_testing.process import free_ports_in_a_row
from tests.e2e.harness import ServiceProcess, free_port, scrape

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STUBS = {"laredo.v1.TableSyncQuery": query_pb2_grpc.TableSyncQueryStub,
         "laredo.v1.LaredoQueryService": query_pb2_grpc.LaredoQueryServiceStub}
BIG = 9_007_199_254_740_993  # 2**53 + 1: travels as a string
ITEMS = 300


@dataclass
class Pipeline:
    dsn: str
    items: str  # schema.table
    accounts: str
    query_port: int
    query: ServiceProcess
    ingest: ServiceProcess

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(f"127.0.0.1:{self.query_port}")

    def sql(self, statement: str, params: Any = None) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement, params)


def create_tables(dsn: str, items: str, accounts: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {items} (id bigint PRIMARY KEY, email text UNIQUE, status text NOT NULL, "
                     "qty int, price numeric(10,2), big bigint, doc text, "
                     "updated_at timestamptz NOT NULL DEFAULT '2026-01-01 00:00:00+00')")
        conn.execute(f"INSERT INTO {items} (id, email, status, qty, price, big, doc) "
                     "SELECT g, 'u' || g || '@example.com', CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END, "
                     f"g % 5, g * 1.25, {BIG} + g, "
                     "CASE WHEN g <= 3 THEN (SELECT string_agg(md5(g::text || i::text), '') "
                     "FROM generate_series(1, 400) i) ELSE 'short' END "
                     f"FROM generate_series(1, {ITEMS}) g")
        conn.execute(f"CREATE TABLE {accounts} (region text, code text, name text, PRIMARY KEY (region, code))")
        conn.execute(f"INSERT INTO {accounts} SELECT r, 'c' || g, 'name ' || g FROM unnest(ARRAY['eu', 'us']) r, "
                     "generate_series(1, 10) g")


def write_config(path: Path, *, dsn: str, nats_url: str, name: str, items: str, accounts: str, query_port: int,
                 health: dict[str, int]) -> Path:
    def table(qualified: str, target: str) -> str:
        schema, table_name = qualified.split(".")
        return f"{{ source = pg, schema = {schema}, table = {table_name}, targets = [ {target} ] }}"

    items_target = ("{ type = indexed-memory, lookup_fields = [email], indexes = [ "
                    "{ name = by_status, fields = [status] }, { name = by_status_qty, fields = [status, qty] }, "
                    "{ name = by_big, fields = [big], unique = true }, { name = by_price, fields = [price] } ] }")
    accounts_target = "{ type = indexed-memory, indexes = [ { name = by_name, fields = [name] } ] }"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = {json.dumps(dsn)}, slot_name = slot_{name}, status_interval = 1s }} }}
tables = [ {table(items, items_target)}, {table(accounts, accounts_target)} ]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {name} }}
ingest {{ health_host = 127.0.0.1, health_port = {health["ingest"]} }}
query {{ grpc {{ host = 127.0.0.1, port = {query_port} }}, health_host = 127.0.0.1, health_port = {health["query"]} }}
""")
    return path


@pytest.fixture
def pipeline(pg_dsn: str, nats_url: str, unique_name: str, tmp_path: Path) -> Iterator[Pipeline]:
    items, accounts = f"public.{unique_name}_items", f"public.{unique_name}_accounts"
    create_tables(pg_dsn, items, accounts)
    query_port, health = free_port(), {"ingest": free_port(), "query": free_port()}
    config = write_config(tmp_path / "laredo.conf", dsn=pg_dsn, nats_url=nats_url, name=unique_name, items=items,
                          accounts=accounts, query_port=query_port, health=health)
    ingest = ServiceProcess("ingest", config, health["ingest"], tmp_path / "ingest.log")
    query = ServiceProcess("query", config, health["query"], tmp_path / "query.log")
    ingest.start()
    query.start()
    try:
        ingest.wait_ready()
        query.wait_ready()
        yield Pipeline(pg_dsn, items, accounts, query_port, query, ingest)
    finally:
        query.stop()
        ingest.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{unique_name}",))


def table_rows(dsn: str, table: str, key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """SELECT * as a query client sees it: JSON values through Struct, so numbers are doubles."""
    with psycopg.connect(dsn, options="-c TimeZone=UTC") as conn:
        cur = conn.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cur.description]
        rows = [row_to_json(dict(zip(names, r))) for r in cur.fetchall()]
    return {tuple(r[k] for k in key): client(r) for r in rows}


def client(values: dict[str, Any]) -> dict[str, Any]:
    return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in values.items()}


async def listed(stub: Any, table: str, key: tuple[str, ...], page_size: int = 64) -> dict[tuple[Any, ...], dict]:
    """Every row through ListRows pages, keyed like table_rows()."""
    schema, name = table.split(".")
    rows: dict[tuple[Any, ...], dict] = {}
    token = ""
    while True:
        page = await stub.ListRows(pb.ListRowsRequest(schema=schema, table=name, page_size=page_size,
                                                      page_token=token))
        for r in page.rows:
            values = MessageToDict(r)
            rows[tuple(_key_part(values[k]) for k in key)] = values
        token = page.next_page_token
        if not token:
            return rows


def _key_part(v: Any) -> Any:
    return int(v) if isinstance(v, float) else v


def value(v: Any) -> struct_pb2.Value:
    out = struct_pb2.Value()
    if v is None:
        out.null_value = 0
    elif isinstance(v, str):
        out.string_value = v
    else:
        out.number_value = v
    return out


async def query_matches(pipeline: Pipeline, stub: Any) -> bool:
    expected_items = await asyncio.to_thread(table_rows, pipeline.dsn, pipeline.items, ("id",))
    expected_accounts = await asyncio.to_thread(table_rows, pipeline.dsn, pipeline.accounts, ("region", "code"))
    items = await listed(stub, pipeline.items, ("id",))
    accounts = await listed(stub, pipeline.accounts, ("region", "code"))
    return items == expected_items and accounts == expected_accounts


async def error_of(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_every_query_rpc_and_error_code_after_baseline_and_changes(pipeline: Pipeline) -> None:
    p = pipeline
    p.sql(f"UPDATE {p.items} SET status = 'paid', qty = 42 WHERE id IN (1, 10)")  # id 1 keeps its TOASTed doc
    p.sql(f"DELETE FROM {p.items} WHERE id = 2")
    p.sql(f"UPDATE {p.items} SET id = 1000 WHERE id = 5")  # a primary key change moves the row
    p.sql(f"INSERT INTO {p.items} (id, email, status, qty, price, big) VALUES (301, 'new@example.com', 'odd', 1, "
          f"0.10, {BIG} + 301)")
    p.sql(f"UPDATE {p.accounts} SET code = 'moved' WHERE region = 'eu' AND code = 'c1'")
    items_schema, items_name = p.items.split(".")
    accounts_schema, accounts_name = p.accounts.split(".")
    items = {"schema": items_schema, "table": items_name}
    accounts = {"schema": accounts_schema, "table": accounts_name}
    async with p.channel() as channel:
        for service_name, stub_type in STUBS.items():
            stub = stub_type(channel)
            await eventually(lambda s=stub: query_matches(p, s), timeout=30,
                             what=f"ListRows through {service_name} equals SELECT * of both tables")
            expected = await asyncio.to_thread(table_rows, p.dsn, p.items, ("id",))
            assert len(expected[(1,)]["doc"]) == 400 * 32, "the TOASTed value survived an update that kept it"

            found = await stub.Lookup(pb.LookupRequest(**items, key_values=[value("u10@example.com")]))
            assert found.found and MessageToDict(found.row) == expected[(10,)]
            assert not (await stub.Lookup(pb.LookupRequest(**items, key_values=[value("u2@example.com")]))).found
            big = await stub.Lookup(pb.LookupRequest(**items, index_name="by_big", key_values=[value(str(BIG + 7))]))
            assert big.found and big.row.fields["id"].number_value == 7 and big.row.fields["big"].string_value
            price = await stub.LookupAll(pb.LookupAllRequest(**items, index_name="by_price", key_values=[value(0.1)]))
            assert [r.fields["id"].number_value for r in price.rows] == [301]
            paid = await stub.LookupAll(pb.LookupAllRequest(**items, index_name="by_status_qty",
                                                            key_values=[value("paid"), value(42.0)]))
            assert [r.fields["id"].number_value for r in paid.rows] == [1, 10]
            even = await stub.LookupAll(pb.LookupAllRequest(**items, index_name="by_status",
                                                            key_values=[value("even")]))
            assert len(even.rows) == ITEMS // 2 - 2  # ids 2 (deleted) and 10 (paid) left "even"

            moved = await stub.GetRow(pb.GetRowRequest(**items, primary_key=1000))
            assert moved.found and moved.row.fields["email"].string_value == "u5@example.com"
            assert not (await stub.GetRow(pb.GetRowRequest(**items, primary_key=5))).found
            assert (await stub.GetRow(pb.GetRowRequest(**items, primary_key_values=[value("301")]))).found
            account = await stub.GetRow(pb.GetRowRequest(**accounts, primary_key_values=[value("eu"), value("moved")]))
            assert account.row.fields["name"].string_value == "name 1"
            by_name = await stub.LookupAll(pb.LookupAllRequest(**accounts, index_name="by_name",
                                                               key_values=[value("name 1")]))
            assert sorted(r.fields["region"].string_value + "/" + r.fields["code"].string_value
                          for r in by_name.rows) == ["eu/moved", "us/c1"]
            primary = await stub.Lookup(pb.LookupRequest(**accounts, key_values=[value("us"), value("c3")]))
            assert primary.row.fields["name"].string_value == "name 3", "no lookup_fields: Lookup uses the key"
            assert (await stub.CountRows(pb.CountRowsRequest(**items))).count == ITEMS
            assert (await stub.CountRows(pb.CountRowsRequest(**accounts))).count == 20
            first = await stub.ListRows(pb.ListRowsRequest(**accounts, page_size=3))
            assert first.total_count == 20 and first.next_page_token
            codes = [r.fields["code"].string_value for r in first.rows]
            assert codes == ["c10", "c2", "c3"], "text key order (eu/c1 moved away)"

            await check_error_codes(stub, items, accounts, first.next_page_token)


async def check_error_codes(stub: Any, items: dict[str, str], accounts: dict[str, str], accounts_token: str) -> None:
    invalid, not_found = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    cases = [
        (stub.Lookup(pb.LookupRequest(table=items["table"], key_values=[value("x")])), invalid, "schema required"),
        (stub.LookupAll(pb.LookupAllRequest(schema="public")), invalid, "table required"),
        (stub.GetRow(pb.GetRowRequest(schema="public", table="no_such_table")), not_found, "no indexed-memory target"),
        (stub.ListRows(pb.ListRowsRequest(schema="nope", table=items["table"])), not_found, "no indexed-memory target"),
        (stub.CountRows(pb.CountRowsRequest()), invalid, "schema and table required"),
        (stub.LookupAll(pb.LookupAllRequest(**items, key_values=[value("odd")])), invalid, "index_name is required"),
        (stub.Lookup(pb.LookupRequest(**items, index_name="by_colour", key_values=[value("x")])), not_found,
         "no index named 'by_colour'"),
        (stub.LookupAll(pb.LookupAllRequest(**items, index_name="missing", key_values=[value("x")])), not_found,
         "no index named 'missing'"),
        (stub.Lookup(pb.LookupRequest(**items, index_name="by_status_qty", key_values=[value("odd")])), invalid,
         "has 2 column(s) (status, qty); got 1 key value(s)"),
        (stub.GetRow(pb.GetRowRequest(**items, primary_key_values=[value("seven")])), invalid,
         "for integer column 'id'"),
        (stub.GetRow(pb.GetRowRequest(**accounts, primary_key=1)), invalid, "composite primary key (region, code)"),
        (stub.ListRows(pb.ListRowsRequest(**items, page_token="abc")), invalid, "not one this service issued"),
        (stub.ListRows(pb.ListRowsRequest(**items, page_token="v1.!!")), invalid, "not base64url JSON"),
        (stub.ListRows(pb.ListRowsRequest(**items, page_token=accounts_token)), invalid,
         f"belongs to a listing of {accounts['schema']}.{accounts['table']}"),
    ]
    for call, code, text in cases:
        error = await error_of(call)
        assert error.code() == code and text in (error.details() or ""), (code, text, error.details())
    error = await error_of(stub.Subscribe(pb.SubscribeRequest(schema="public", table="nope")).read())
    assert error.code() == not_found
    error = await error_of(stub.Subscribe(pb.SubscribeRequest(table="x")).read())
    assert error.code() == invalid


async def test_subscribe_replays_then_streams_and_pages_survive_concurrent_changes(pipeline: Pipeline) -> None:
    p = pipeline
    schema, name = p.items.split(".")
    items = {"schema": schema, "table": name}
    async with p.channel() as channel:
        stub = STUBS["laredo.v1.TableSyncQuery"](channel)
        call = stub.Subscribe(pb.SubscribeRequest(**items, replay_existing=True))
        replayed = [await asyncio.wait_for(call.read(), 10) for _ in range(ITEMS)]
        assert {r.action for r in replayed} == {"INSERT"}
        assert sorted(int(r.new_values.fields["id"].number_value) for r in replayed) == list(range(1, ITEMS + 1))
        assert all(r.position for r in replayed), "replayed rows carry the position that wrote them"

        p.sql(f"UPDATE {p.items} SET qty = 7 WHERE id = 4")
        p.sql(f"DELETE FROM {p.items} WHERE id = 6")
        p.sql(f"TRUNCATE {p.accounts}")  # another table: nothing for this subscriber
        p.sql(f"INSERT INTO {p.items} (id, status) VALUES (400, 'odd')")
        live = [await asyncio.wait_for(call.read(), 10) for _ in range(3)]
        assert [r.action for r in live] == ["UPDATE", "DELETE", "INSERT"]
        update, delete, insert = live
        assert update.old_values.fields["qty"].number_value == 4 and update.new_values.fields["qty"].number_value == 7
        assert delete.old_values.fields["email"].string_value == "u6@example.com", "the whole old row, not the key"
        assert insert.new_values.fields["id"].number_value == 400 and not insert.HasField("old_values")
        assert update.xid and update.timestamp.seconds and update.position < delete.position < insert.position
        call.cancel()

        stable = set(range(1, ITEMS + 1)) - {6}
        seen: list[int] = []
        token, rnd, churned = "", random.Random(9), 0
        while True:
            page = await stub.ListRows(pb.ListRowsRequest(**items, page_size=25, page_token=token))
            seen.extend(int(r.fields["id"].number_value) for r in page.rows)
            if not page.next_page_token:
                break
            token = page.next_page_token
            victims = rnd.sample(sorted(stable), 3)
            stable -= set(victims)
            churned += 1
            p.sql(f"DELETE FROM {p.items} WHERE id = ANY(%s)", (victims,))
            p.sql(f"INSERT INTO {p.items} (id, status) VALUES (%s, 'new')", (500 + churned,))
            await eventually(lambda v=victims: all_gone(stub, items, v), what="the deletes reached the query service")
        assert seen == sorted(seen) and len(seen) == len(set(seen)), "key order, no row twice"
        assert stable <= set(seen), "every row present for the whole listing appeared"
    ready = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{p.query.health_port}/health/ready").read())
    assert ready["ready"] and set(ready["tables"]) == {p.items, p.accounts}
    assert ready["tables"][p.items]["indexes"]["by_big"]["shared_keys"] == 0


async def all_gone(stub: Any, items: dict[str, str], ids: list[int]) -> bool:
    for i in ids:
        if (await stub.GetRow(pb.GetRowRequest(**items, primary_key=i))).found:
            return False
    return True



def reads(port: int) -> float:
    """Lookup, ListRows, ... calls one worker served (all tables), from its /metrics."""
    return sum(v for (name, _), v in scrape(port)[0].items() if name == "laredo_query_reads_total")


async def test_query_workers_answer_on_one_port(pipeline: Pipeline, tmp_path: Path) -> None:
    """`laredo-query --workers 2`: two whole instances on one port, both answering and both following changes."""
    p = pipeline
    port, health = free_port(), free_ports_in_a_row(3)  # the launcher's, then each worker's
    workers = ServiceProcess("query", p.query.config, health, tmp_path / "query-workers.log", extra_args=[
        "--workers", "2", "--set", f"query.grpc.port={port}", "--set", f"query.health_port={health}"])
    workers.start()
    try:
        workers.wait_ready()  # the launcher's health port: ready once both workers are
        schema, name = p.items.split(".")
        lookup = pb.LookupRequest(schema=schema, table=name, key_values=[value("u10@example.com")])
        p.sql(f"UPDATE {p.items} SET status = 'seen by both' WHERE id = 10")

        async def every_connection_sees_the_update() -> bool:
            for _ in range(12):  # a connection of its own each: a new draw of the kernel's SO_REUSEPORT hash
                options = [("grpc.use_local_subchannel_pool", 1)]
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
                    found = await query_pb2_grpc.TableSyncQueryStub(channel).Lookup(lookup)
                    if found.row.fields["status"].string_value != "seen by both":
                        return False
            return True

        await eventually(every_connection_sees_the_update, timeout=30, what="both workers to apply the update")
        assert reads(health + 1) > 0 and reads(health + 2) > 0
        merged = scrape(health)[0]  # the launcher's /metrics: every worker's, labelled with it
        assert {dict(labels)["worker"] for (name, labels), count in merged.items()
                if name == "laredo_query_reads_total" and count > 0} == {"0", "1"}
    finally:
        workers.stop()
    assert workers.proc is not None and workers.proc.returncode == 0
