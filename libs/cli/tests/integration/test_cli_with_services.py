"""`laredo` run as a user runs it (a subprocess) against the real Query service (fed over NATS JetStream) and
the real OAM service (over Redis, with instances reporting into it): tables for people, JSON for scripts,
exit codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.config import load_settings
from laredo_core.coordination.ports import CommandKind
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_core.stream import naming
from laredo_testing import stream
from laredo_testing.eventually import eventually

from laredo_oam.main import build as build_oam
from laredo_query.main import build as build_query
from libs.cli.tests.cli_runner import Result, laredo_command, run_subprocess, subprocess_env
from services.oam.tests.oam_testkit import beat, executing

pytestmark = pytest.mark.integration

TABLE = TableId("public", "items")
PIPELINE = "pg:public.items:indexed-memory"
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("email", 25, "text", not_null=True),
    ColumnInfo("status", 25, "text"),
    ColumnInfo("qty", 23, "int4"),
    ColumnInfo("note", 25, "text"),
)
ROWS = 25


def item(i: int, **changes: Any) -> dict[str, Any]:
    return {"id": i, "email": f"u{i}@example.com", "status": "odd" if i % 2 else "even", "qty": i % 4,
            "note": f"note {i}", **changes}


TARGET = """{ type = indexed-memory, lookup_fields = [email], indexes = [ { name = by_status, fields = [status] } ] }"""


def write_configs(tmp_path: Path, nats_url: str, redis_url: str, name: str) -> tuple[Path, Path]:
    common = f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = pg, schema = public, table = items, targets = [ {TARGET} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {name} }}
"""
    query = tmp_path / "query.conf"
    query.write_text(common + "query { grpc { host = 127.0.0.1, port = 0 }, health_host = 127.0.0.1, "
                              "health_port = 0, drain_grace = 100ms }\n")
    oam = tmp_path / "oam.conf"
    oam.write_text(common + f'redis {{ url = "{redis_url}", key_prefix = {name} }}\n'
                            "oam { grpc { host = 127.0.0.1, port = 0 }, health_host = 127.0.0.1, health_port = 0, "
                            "command_timeout = 5s }\n")
    return query, oam


def ingest_report() -> dict[str, Any]:
    return {"source": "pg", "phase": "streaming", "leader": True, "confirmed_lsn": "0/16B3748",
            "received_lsn": "0/16B3800", "lag_bytes": 184, "lag_seconds": 0.25, "baseline_complete": True}


def query_report() -> dict[str, Any]:
    columns = [{"name": c.name, "type": c.type_name, "not_null": c.not_null,
                "primary_key_ordinal": c.primary_key_ordinal, "ordinal_position": n}
               for n, c in enumerate(COLUMNS, start=1)]
    return {"ready": True, "tables": {str(TABLE): {"ready": True, "baseline_complete": True, "rows": ROWS,
                                                   "columns": columns}}}


@dataclass
class Stack:
    env: dict[str, str]
    store: RedisCoordinationStore  # the side the instances use
    batches: stream.Batches
    js: Any
    prefix: str

    async def laredo(self, *argv: str) -> Result:
        return await run_subprocess(*argv, env=self.env)

    async def publish(self, message: bytes) -> None:
        await self.js.publish(naming.table_subject(self.prefix, "pg", TABLE), message)


@pytest.fixture
async def services(tmp_path: Path, nats_url: str, redis_url: str, unique_name: str) -> AsyncIterator[Stack]:
    query_conf, oam_conf = write_configs(tmp_path, nats_url, redis_url, unique_name)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream_name = naming.stream_name(unique_name, "pg")
    await js.add_stream(name=stream_name, subjects=[naming.source_subject_filter(unique_name, "pg")])
    batches = stream.Batches(TABLE, COLUMNS)
    for message in batches.baseline([item(i) for i in range(1, ROWS + 1)], chunk_rows=10):
        await js.publish(naming.table_subject(unique_name, "pg", TABLE), message)
    query = build_query(load_settings(query_conf, env={}))
    oam = build_oam(load_settings(oam_conf, env={}))
    stops = [asyncio.Event(), asyncio.Event()]
    tasks = [asyncio.create_task(app.run(stop)) for app, stop in ((query, stops[0]), (oam, stops[1]))]
    store = RedisCoordinationStore(redis_url, unique_name)
    try:
        await eventually(lambda: (query.readiness()[0] and query.started.is_set()) or any(t.done() for t in tasks),
                         what="the query service to load the baseline and serve its port", timeout=20)
        await eventually(lambda: oam.started.is_set() or any(t.done() for t in tasks), what="OAM to start")
        for task in tasks:
            if task.done():
                task.result()
        await beat(store, "ingest", "ingest-1", ingest_report())
        await beat(store, "query", "query-1", query_report())
        env = {"LAREDO_SERVER": f"127.0.0.1:{oam.grpc_port}", "LAREDO_QUERY_SERVER": f"127.0.0.1:{query.grpc_port}"}
        yield Stack(env, store, batches, js, unique_name)
    finally:
        for stop in stops:
            stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)
        await store.aclose()
        await js.delete_stream(stream_name)
        await nc.close()


def ok(result: Result) -> Result:
    assert result.code == 0, result
    return result


async def test_status_tables_schema_and_readiness(services: Stack) -> None:
    status = ok(await services.laredo("status"))
    lines = status.out.splitlines()
    assert lines[0] == "state:        STREAMING"
    sources = next(n for n, line in enumerate(lines) if line.startswith("SOURCE"))
    assert lines[sources].split() == ["SOURCE", "TYPE", "POSITION", "ACKED", "LAG", "BYTES", "LAG", "TIME"]
    assert lines[sources + 1].split() == ["pg", "postgresql", "0/16B3800", "0/16B3748", "184", "0.25s"]
    assert lines[sources + 3].split() == ["PIPELINE", "STATE", "ROWS", "LAST", "CHANGE", "LAST", "BASELINE",
                                          "ERROR"]
    assert lines[sources + 4].split()[:3] == [PIPELINE, "STREAMING", str(ROWS)]
    document = ok(await services.laredo("status", "--json")).json()
    assert document["state"] == "SERVICE_STATE_STREAMING"
    assert (document["sources"][0]["lag_bytes"], document["sources"][0]["lag_time"]) == (184, 0.25)
    [pipeline] = document["pipelines"]
    assert (pipeline["pipeline_id"], pipeline["state"], pipeline["row_count"]) == (
        PIPELINE, "PIPELINE_STATE_STREAMING", ROWS)

    tables = ok(await services.laredo("tables"))
    assert tables.out.splitlines() == ["TABLE         SOURCE  SOURCE TYPE  TARGET          PRIMARY KEY",
                                       "public.items  pg      postgresql   indexed-memory  id"]
    [config] = ok(await services.laredo("tables", "--json")).json()["tables"]
    assert (config["schema"], config["table"], config["target_type"]) == ("public", "items", "indexed-memory")

    schema = ok(await services.laredo("schema", "items"))
    assert schema.out.splitlines() == ["#  COLUMN  TYPE  NOT NULL  PRIMARY KEY",
                                       "1  id      int8  yes       1",
                                       "2  email   text  yes       -",
                                       "3  status  text  no        -",
                                       "4  qty     int4  no        -",
                                       "5  note    text  no        -"]
    columns = ok(await services.laredo("schema", "public.items", "--json")).json()["columns"]
    assert [(c["column_name"], c["is_primary_key"]) for c in columns][:2] == [("id", True), ("email", False)]

    assert ok(await services.laredo("ready", "--table", "items")).out == "ready\n"
    unknown = await services.laredo("status", "--table", "public.nope")
    assert unknown.code == 4 and "NOT_FOUND" in unknown.err and "public.nope" in unknown.err, unknown
    assert "configured tables: public.items" in unknown.err, unknown


async def test_administration_and_its_exit_codes(services: Stack) -> None:
    async with executing(services.store, "ingest:pg", "ingest-1") as seen:
        reload = ok(await services.laredo("reload", "items"))
        assert reload.out.startswith("reload of public.items: accepted\n  ingest:pg: succeeded")
        assert ok(await services.laredo("pause", "--source", "pg")).out == "state: PAUSED\n"
        assert ok(await services.laredo("pause", "pg")).out == "state: PAUSED\n"
        assert ok(await services.laredo("resume", "--json")).json() == {"state": "SERVICE_STATE_STREAMING"}
        unconfirmed = await services.laredo("reset", "pg")
        assert unconfirmed.code == 5 and "--yes" in unconfirmed.err, unconfirmed
        reset = ok(await services.laredo("reset", "pg", "--yes", "--json")).json()
        assert reset["accepted"] is True and reset["details"]["ingest-1"] == {"kind": "reset"}
    assert [command.kind for command in seen] == [CommandKind.RELOAD, CommandKind.PAUSE, CommandKind.PAUSE,
                                                  CommandKind.RESUME, CommandKind.RESET]
    unknown_table = await services.laredo("reload", "nosuch.table")
    assert unknown_table.code == 4, unknown_table
    assert "nosuch.table is not configured; configured tables: public.items" in unknown_table.err, unknown_table
    unknown_source = await services.laredo("pause", "--source", "nope")
    assert unknown_source.code == 4, unknown_source


async def test_query_commands_print_tables_and_exact_json(services: Stack) -> None:
    assert ok(await services.laredo("count", "items")).out == f"{ROWS}\n"
    assert ok(await services.laredo("count", "items", "--json")).json() == {"count": ROWS}

    row = ok(await services.laredo("get", "items", "7"))
    assert row.out.splitlines() == ["email:   u7@example.com", "id:      7", "note:    note 7", "qty:     3",
                                    "status:  odd"]
    assert ok(await services.laredo("get", "public.items", "7", "--json")).json() == {"found": True, "row": item(7)}
    missing = await services.laredo("get", "items", "999")
    assert (missing.code, missing.out) == (1, ""), missing
    assert "no row of public.items has primary key 999" in missing.err
    missing_json = await services.laredo("get", "items", "999", "--json")
    assert (missing_json.code, missing_json.json()) == (1, {"found": False, "row": None})

    found = ok(await services.laredo("lookup", "items", "u3@example.com", "--json")).json()
    assert found == {"found": True, "row": item(3)}
    odd = ok(await services.laredo("lookup", "items", "--index", "by_status", "--all", "odd",
                                   "--columns", "id,email"))
    assert odd.out.splitlines()[:3] == ["id  email", " 1  u1@example.com", " 3  u3@example.com"]
    assert len(odd.out.splitlines()) == 1 + 13
    odd_json = ok(await services.laredo("lookup", "items", "--index", "by_status", "--all", "odd", "--json")).json()
    assert odd_json == {"rows": [item(i) for i in range(1, ROWS + 1, 2)]}

    page = ok(await services.laredo("list", "items", "--page-size", "10"))
    lines = page.out.splitlines()
    assert lines[0].split() == ["email", "id", "note", "qty", "status"] and len(lines) == 1 + 10 + 1
    assert lines[-1].startswith(f"10 of {ROWS} rows; next page: laredo list public.items --page-token ")
    first = ok(await services.laredo("list", "items", "--page-size", "10", "--json")).json()
    second = ok(await services.laredo("list", "items", "--page-size", "10", "--page-token",
                                      first["next_page_token"], "--json")).json()
    assert [r["id"] for r in first["rows"] + second["rows"]] == list(range(1, 21))
    everything = ok(await services.laredo("list", "items", "--page-size", "7", "--all", "--json")).json()
    assert everything == {"rows": [item(i) for i in range(1, ROWS + 1)], "next_page_token": "", "total_count": ROWS}


async def test_query_errors_have_their_exit_codes(services: Stack) -> None:
    for argv, code, words in (
            (["count", "nope"], 4, "no indexed-memory target for public.nope"),
            (["lookup", "items", "--index", "nope", "x"], 4, "no index named 'nope'"),
            (["get", "items", "abc"], 2, "INVALID_ARGUMENT"),
            (["count", "items", "--query-server", "127.0.0.1:1"], 3, "cannot reach the Query service at 127.0.0.1:1"),
            (["lookup", "items", "--all", "x"], 2, "--all needs --index")):
        result = await services.laredo(*argv)
        assert (result.code, result.out) == (code, ""), (argv, result)
        assert words in result.err, (argv, result)


async def test_subscribe_replays_then_streams_live_changes(services: Stack) -> None:
    process = await asyncio.create_subprocess_exec(
        *laredo_command(), "subscribe", "items", "--replay", "--json", "--count", str(ROWS + 1),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=subprocess_env(services.env))
    try:
        assert process.stdout is not None
        replayed = [json.loads(await asyncio.wait_for(process.stdout.readline(), 30)) for _ in range(ROWS)]
        assert {e["action"] for e in replayed} == {"INSERT"}
        assert sorted(e["new_values"]["id"] for e in replayed) == list(range(1, ROWS + 1))
        await services.publish(services.batches.transaction(services.batches.update(item(5, note="changed"))))
        live = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
        assert (live["action"], live["new_values"], live["old_values"]["id"]) == ("UPDATE", item(5, note="changed"), 5)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
