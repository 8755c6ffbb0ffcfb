"""Repairs reach clients that were away: a dead-letter replay changes fan-out's rows while a library client is
disconnected, and the client, resuming by source position, receives the repairs.

ingest, fan-out, query and OAM run as real processes on a throwaway PostgreSQL, NATS and Redis. The client
(laredo_client.LaredoClient) stops and saves its local snapshot; its cursor then names only its source position
(as a client that reconnects through a load balancer has nothing else the server can honour). Two dead letters of
fan-out's pipeline (inserts of rows fan-out never applied) are replayed through OAM meanwhile; the restarted
client resumes by DELTA and ends holding exactly what a fresh client of the same fan-out holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from laredo.v1 import oam_pb2
from laredo_client import LaredoClient
from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.nats_store import NatsDeadLetterStore
from laredo_testing.eventually import eventually
from laredo_testing.stream import Batches

from tests.e2e.harness import create_table
from tests.e2e.system import SOURCE, System, running_system

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLUMNS = (  # harness.create_table's columns
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text", not_null=True),
    ColumnInfo("qty", 23, "int4"),
    ColumnInfo("note", 25, "text"),
    ColumnInfo("updated_at", 1184, "timestamptz", not_null=True),
)


@pytest.fixture
def system(pg_dsn: str, nats_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 50)
    with running_system(pg_dsn, nats_url, unique_name, table, tmp_path, redis_url=redis_url) as running:
        yield running


def client(system: System, path: Path, client_id: str) -> LaredoClient:
    return LaredoClient(f"127.0.0.1:{system.ports['fanout']}", system.table.schema, system.table.name,
                        local_snapshot_path=path, client_id=client_id)


def rows(c: LaredoClient) -> dict[Any, dict[str, Any]]:
    return {row["id"]: dict(row) for row in c.all()}


def forget_the_sequence(path: Path) -> str:
    """Keep only the source position in the saved cursor; returns it."""
    document = json.loads(path.read_text())
    document.pop("journal_epoch", None)
    document.update(last_seq=0, server_id="")
    path.write_text(json.dumps(document))
    return str(document["last_source_position"])


async def write_letters(system: System, *row_ids: int) -> None:
    """Dead letters of fan-out's pipeline: inserts of rows fan-out never applied, as a consumer records them."""
    pipeline = PipelineId(SOURCE, system.table, "replication-fanout")
    batches = Batches(system.table, COLUMNS, lsn=0x10)
    store = NatsDeadLetterStore([system.nats_url], system.prefix)
    try:
        for row_id in row_ids:
            message = batches.transaction(batches.insert({"id": row_id, "name": f"replayed {row_id}", "qty": 1,
                                                          "note": None, "updated_at": "2026-01-01 00:00:00+00"}))
            await store.write(DeadLetter(pipeline, f"e2e-{row_id}", "not applied", message, 0))
    finally:
        await store.close()


async def test_a_client_resuming_by_position_receives_the_repairs_made_while_it_was_away(
        system: System, tmp_path: Path) -> None:
    saved = tmp_path / "client.json"
    away = client(system, saved, "away")
    await away.start()
    await away.await_ready(60)
    system.sql(f"UPDATE {system.table} SET name = 'changed' WHERE id = 7")
    await eventually(lambda: (away.get(7) or {}).get("name") == "changed", timeout=30, what="the update")
    await away.stop()
    position = forget_the_sequence(saved)
    assert position, "the client saved its source position"

    await write_letters(system, 9001, 9002)
    replayed = await system.oam("ReplayDeadLetters", oam_pb2.ReplayDeadLettersRequest(
        pipeline_id=system.pipeline("replication-fanout")))
    assert (replayed.replayed, replayed.succeeded, replayed.failed) == (2, 2, 0), replayed

    fresh = client(system, tmp_path / "fresh.json", "fresh")
    back = client(system, saved, "back")
    try:
        await fresh.start()
        await fresh.await_ready(60)
        assert {9001, 9002} <= set(rows(fresh)), "fan-out holds the replayed rows"
        await back.start()
        await back.await_ready(60)
        await eventually(lambda: rows(back) == rows(fresh), timeout=30,
                         what="the resumed client to hold what fan-out holds, the repairs included")
        assert back.stats.restored_from_local and back.stats.modes[0] == "DELTA", back.stats.modes
        assert back.stats.full_resyncs == 0
        assert back.last_source_position != position, "it resumes after the repairs next time"
    finally:
        await back.stop()
        await fresh.stop()
    system.assert_running()
