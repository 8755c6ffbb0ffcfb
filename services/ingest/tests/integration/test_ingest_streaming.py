"""pgoutput protocol 2 with streaming of in-progress transactions, against real PostgreSQL and NATS."""

from __future__ import annotations

import psycopg
import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

ITEMS = TableId("public", "items")
SMALL_DECODING_MEMORY = "options='-c logical_decoding_work_mem=64kB'"


@pytest.mark.slow
async def test_a_streamed_transaction_arrives_whole_and_an_aborted_one_never(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    settings = ingest_settings(connection=f"{pg_dsn} {SMALL_DECODING_MEMORY}",
                               extra="stream.max_batch_changes = 1000\nsources.main.spool_memory = 1MiB")
    running = start_app(make_app(settings))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    async with await psycopg.AsyncConnection.connect(pg_dsn) as big, \
            await psycopg.AsyncConnection.connect(pg_dsn) as doomed:
        await big.execute("INSERT INTO items SELECT i, 'big ' || i FROM generate_series(1, 25000) i")
        await doomed.execute("INSERT INTO items SELECT i, 'doomed' FROM generate_series(100001, 120000) i")
        await pg.execute("INSERT INTO items VALUES (0, 'small, committed while the big one runs')")
        await big.execute("SAVEPOINT s")
        await big.execute("INSERT INTO items SELECT i, 'rolled back' FROM generate_series(200001, 203000) i")
        await big.execute("ROLLBACK TO SAVEPOINT s")
        await big.execute("INSERT INTO items SELECT i, 'big ' || i FROM generate_series(25001, 50000) i")
        await doomed.rollback()
        await big.commit()
    await eventually(lambda: running.app.status.streamed_transactions >= 1, timeout=60,
                     what="the big transaction streamed and committed")
    await eventually(lambda: _has_rows(nats_url, unique_name, 50_001), timeout=60, what="every committed row")
    assert running.app.status.aborted_streamed_transactions >= 1 and running.app.status.spooled_bytes == 0
    messages = await read_stream(nats_url, unique_name)
    transactions = [m.batch for m in messages if m.batch.kind is BatchKind.TRANSACTION]
    assert [len(b.changes) for b in transactions][0] == 1, "the small transaction committed first comes first"
    big_commit = {b.commit_lsn for b in transactions[1:]}
    assert len(big_commit) == 1 and sum(len(b.changes) for b in transactions[1:]) == 50_000
    assert transactions[-1].end_lsn and transactions[-1].last_chunk
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    names = {row["name"] for row in replica.rows(ITEMS).values()}
    assert "doomed" not in names and "rolled back" not in names
    await running.stop_cleanly()


async def _has_rows(nats_url: str, prefix: str, count: int) -> bool:
    return count == sum(len(m.batch.changes) for m in await read_stream(nats_url, prefix)
                        if m.batch.kind is BatchKind.TRANSACTION)
