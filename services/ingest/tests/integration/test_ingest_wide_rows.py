"""Wide rows never wedge ingest: every message fits the NATS server's max_payload (1 MiB by default), with the
default `baseline.chunk_rows = 2000`, and a single row too large for any message is a named dead letter."""

from __future__ import annotations

import nats
import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_core.deadletters.model import PipelineId
from laredo_core.deadletters.nats_store import NatsDeadLetterStore
from laredo_core.stream.naming import stream_name
from laredo_testing.eventually import eventually

from services.ingest.tests.stream_replica import StreamReplica, assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

DOCS = TableId("public", "docs")
DEFAULT_CHUNKS = "sources.main.baseline.chunk_rows = 2000"
#: About 10 kB of text per row (TOASTed in the table; COPY and pgoutput send it whole).
WIDE = "(SELECT string_agg(md5(g::text || '-' || %s::text), '') FROM generate_series(1, 320) g)"
#: About 1.5 MB: more than one NATS message may carry.
HUGE = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 48000) g)"


async def largest_stored_message(nats_url: str, prefix: str) -> tuple[int, int]:
    """(the largest message of the source's stream in bytes, the server's max_payload)."""
    client = await nats.connect(nats_url)
    try:
        js, name = client.jetstream(), stream_name(prefix, "main")
        info = await js.stream_info(name)
        sizes = [len((await js.get_msg(name, seq)).data or b"")
                 for seq in range(info.state.first_seq, info.state.last_seq + 1)]
        return max(sizes), client.max_payload
    finally:
        await client.close()


@pytest.fixture
def start_on_docs(pg, ingest_settings, make_app, start_app):
    """Create table docs with the given rows (SQL), start ingest on it with the default chunk_rows, wait for
    the baseline; return the running app."""

    async def start(rows: str, what: str):
        await pg.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
        await pg.execute(f"INSERT INTO docs {rows}")
        running = start_app(make_app(ingest_settings(tables=("docs",), extra=DEFAULT_CHUNKS)))
        await eventually(lambda: running.app.status.ready, timeout=60, what=what)
        return running

    return start


async def test_a_table_of_wide_rows_baselines_and_streams_with_the_default_chunk_rows(
        pg, pg_dsn, start_on_docs, nats_url, unique_name) -> None:
    running = await start_on_docs(f"SELECT i, {WIDE.replace('%s', 'i')} FROM generate_series(1, 300) i",
                                  "the 3 MB baseline done")
    await pg.execute(f"UPDATE docs SET body = {WIDE.replace('%s', '(id + 1000)')}")  # one 3 MB transaction
    await pg.execute(f"INSERT INTO docs SELECT i, {WIDE.replace('%s', 'i')} FROM generate_series(301, 400) i")

    await eventually(lambda: running.app.status.transactions >= 2, timeout=60, what="both transactions read")
    status = running.app.status
    await eventually(lambda: status.published_messages > 0 and status.changes >= 400, timeout=60,
                     what="400 changes published")
    replica = await eventually(lambda: _replica_if_equal(nats_url, unique_name, pg_dsn), timeout=60,
                               what="the replica equal to the table")
    assert len(replica.rows(DOCS)) == 400
    messages = await read_stream(nats_url, unique_name)
    assert sum(m.batch.kind is BatchKind.BASELINE_ROWS for m in messages) >= 3, "3 MB of rows: several messages"
    largest, max_payload = await largest_stored_message(nats_url, unique_name)
    assert largest <= min(max_payload, 512 * 1024 + 64 * 1024), "max_batch_bytes (512KiB) and max_payload hold"
    assert running.app.status.restarts == 0 and running.app.status.oversized_changes == 0
    await running.stop_cleanly()


async def _replica_if_equal(nats_url: str, prefix: str, dsn: str) -> StreamReplica | None:
    try:
        return await assert_replica_equals_table(nats_url, prefix, dsn, DOCS)
    except AssertionError:
        return None


async def test_a_row_too_large_for_any_message_is_dead_lettered_and_ingest_keeps_streaming(
        pg, pg_dsn, start_on_docs, nats_url, unique_name) -> None:
    running = await start_on_docs(f"VALUES (1, 'small'), (2, {HUGE}), (3, 'small too')",
                                  "the baseline done despite row 2")
    await pg.execute(f"INSERT INTO docs VALUES (4, {HUGE})")
    await pg.execute("INSERT INTO docs VALUES (5, 'after the huge one')")
    await eventually(lambda: running.app.status.changes >= 1 and running.app.status.oversized_changes == 2,
                     timeout=60, what="the huge insert dead-lettered and the next one streamed")
    wal_end = (await (await pg.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")).fetchone())[0]
    await eventually(lambda: running.app.status.confirmed_lsn >= wal_end - 4096, timeout=60,
                     what="the WAL past the huge row confirmed: the slot does not hold it")
    status = running.app.status
    assert status.restarts == 0 and status.phase.value == "streaming", "no restart, no crash loop"
    assert "public.docs" in status.last_oversized and "max_payload" in status.last_oversized
    assert status.report()["oversized_changes"] == 2 and status.gauges()["oversized_changes_total"] == 2.0
    await assert_replica_equals_table(nats_url, unique_name, pg_dsn, DOCS, where="id NOT IN (2, 4)")
    letters = await _oversized_letters(nats_url, unique_name)
    assert sorted(letters) == ["2", "4"], "each huge row is kept as a dead letter naming its key"
    await running.stop_cleanly()


async def _oversized_letters(nats_url: str, prefix: str) -> list[str]:
    """The keys of the dead-lettered rows: in the dead-letter store, or on the table's dead-letter subject."""
    replica = StreamReplica(await read_stream(nats_url, prefix))
    keys = [c.new["id"] for m in replica.deadletter for c in m.batch.changes]
    store = NatsDeadLetterStore([nats_url], prefix)
    try:
        page = await store.list(PipelineId("main", DOCS, "replication-fanout"))
    finally:
        await store.close()
    keys += [letter.new_values["id"] for letter in page.letters if letter.new_values]
    return sorted(str(k) for k in keys)
