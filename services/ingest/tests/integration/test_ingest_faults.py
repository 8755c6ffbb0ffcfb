"""Faults against real servers; after each one a downstream replica equals the table.

PostgreSQL restarts and slot invalidation run on a private server (module fixture), never the shared one.
Kills use the `laredo-ingest` command (SIGKILL: no clean stop, no final confirmation).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_testing.eventually import eventually
from laredo_testing.postgres import PostgresServer

from services.ingest.tests.stream_replica import assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

ITEMS = TableId("public", "items")


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PostgresServer]:
    """A server of this module's own: restarted and reconfigured by the tests."""
    with PostgresServer({"max_slot_wal_keep_size": "1MB", "wal_keep_size": 0}) as server:
        yield server


@pytest.fixture
def private_dsn(private_pg: PostgresServer, unique_name: str) -> Iterator[str]:
    dsn = private_pg.create_database(unique_name)
    yield dsn
    if private_pg.running:
        private_pg.drop_database(unique_name)


async def create_items(dsn: str, rows: int) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        await conn.execute("INSERT INTO items SELECT i, 'row ' || i FROM generate_series(1, %s::int) i", (rows,))


async def execute(dsn: str, *statements: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            await conn.execute(statement)


async def has_item(nats_url: str, prefix: str, item_id: int) -> bool:
    return any(c.new and c.new.get("id") == item_id for m in await read_stream(nats_url, prefix)
               for c in m.batch.changes)


async def test_a_postgresql_restart_is_survived(private_pg, private_dsn, ingest_settings, make_app, start_app,
                                                nats_url, unique_name) -> None:
    await create_items(private_dsn, 100)
    running = start_app(make_app(ingest_settings(connection=private_dsn)))
    await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
    await execute(private_dsn, "INSERT INTO items VALUES (1001, 'before the restart')")
    await eventually(lambda: has_item(nats_url, unique_name, 1001), timeout=30, what="the first change")
    private_pg.restart("fast")
    await execute(private_dsn, "INSERT INTO items VALUES (1002, 'after the restart')", "DELETE FROM items WHERE id = 5")
    await eventually(lambda: has_item(nats_url, unique_name, 1002), timeout=60, what="the change after the restart")
    assert running.app.status.restarts >= 1
    await assert_replica_equals_table(nats_url, unique_name, private_dsn, ITEMS)
    assert [m.batch.kind for m in await read_stream(nats_url, unique_name)].count(BatchKind.BASELINE_END) == 1
    await running.stop_cleanly()


async def test_a_slot_dropped_while_ingest_was_down_means_resync_and_a_new_baseline(
        pg, pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await create_items(pg_dsn, 300)
    first = start_app(make_app())
    await eventually(lambda: first.app.status.ready, timeout=30, what="baseline done")
    await first.stop_cleanly()
    await pg.execute("SELECT pg_drop_replication_slot(%s)", (unique_name,))
    for i in range(500):  # changes made while the slot is gone: never streamed
        await pg.execute("INSERT INTO items VALUES (%s, 'while down')", (10_000 + i,))
    await pg.execute("DELETE FROM items WHERE id <= 50")
    second = start_app(make_app())
    await eventually(lambda: second.app.status.ready, timeout=30, what="second baseline done")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    [resync] = replica.tables[ITEMS].resyncs
    assert "was dropped" in resync.reason and replica.tables[ITEMS].baselines == 2
    await second.stop_cleanly()


async def test_an_invalidated_slot_means_resync_and_a_new_baseline(
        private_pg, private_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await create_items(private_dsn, 200)
    first = start_app(make_app(ingest_settings(connection=private_dsn)))
    await eventually(lambda: first.app.status.ready, timeout=30, what="baseline done")
    await first.stop_cleanly()
    await execute(private_dsn, "DELETE FROM items WHERE id <= 20", "INSERT INTO items VALUES (5000, 'lost change')")

    async def invalidated() -> bool:  # more WAL than max_slot_wal_keep_size, then a checkpoint
        async with await psycopg.AsyncConnection.connect(private_dsn, autocommit=True) as conn:
            for _ in range(3):
                await conn.execute("INSERT INTO items VALUES (-1, 'x') ON CONFLICT (id) DO NOTHING")
                await conn.execute("SELECT pg_switch_wal()")
            await conn.execute("CHECKPOINT")
            cur = await conn.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s",
                                     (unique_name,))
            return (await cur.fetchone())[0] == "lost"

    await eventually(invalidated, timeout=30, what="the slot invalidated")
    second = start_app(make_app(ingest_settings(connection=private_dsn)))
    await eventually(lambda: second.app.status.ready, timeout=30, what="baseline after the invalidation")
    replica = await assert_replica_equals_table(nats_url, unique_name, private_dsn, ITEMS)
    [resync] = replica.tables[ITEMS].resyncs
    assert "invalidated" in resync.reason
    await second.stop_cleanly()


@pytest.fixture
async def ingest_process(ingest_settings, tmp_path: Path) -> AsyncIterator:
    """Start `laredo-ingest` with this test's configuration; killed (if still running) at teardown."""
    processes = []

    async def start(**overrides) -> asyncio.subprocess.Process:
        ingest_settings(**overrides)  # writes the configuration file
        config = sorted(tmp_path.glob("laredo-*.conf"))[-1]
        script = Path(sys.executable).with_name("laredo-ingest")
        process = await asyncio.create_subprocess_exec(str(script), "--config", str(config), "--log-level",
                                                       "warning", stderr=asyncio.subprocess.DEVNULL)
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def sigkill(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGKILL)
    await process.wait()


@pytest.mark.slow
async def test_sigkill_during_a_baseline(pg, pg_dsn, ingest_process, make_app, start_app, nats_url,
                                         unique_name) -> None:
    await create_items(pg_dsn, 150_000)
    process = await ingest_process(extra="sources.main.baseline.chunk_rows = 500")

    async def baseline_under_way() -> bool:
        kinds = [m.batch.kind for m in await read_stream(nats_url, unique_name)]
        return kinds.count(BatchKind.BASELINE_ROWS) >= 5 and BatchKind.BASELINE_END not in kinds

    await eventually(baseline_under_way, timeout=60, what="a baseline half published")
    await sigkill(process)
    await pg.execute("DELETE FROM items WHERE id % 3 = 0")
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=120, what="a complete baseline after the kill")
    replica = await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    assert replica.tables[ITEMS].baselines == 1
    await running.stop_cleanly()


@pytest.mark.slow
async def test_sigkill_during_a_large_transaction(pg, pg_dsn, ingest_process, make_app, start_app, nats_url,
                                                  unique_name) -> None:
    await create_items(pg_dsn, 10)
    process = await ingest_process(extra="stream.max_batch_changes = 500")
    await eventually(lambda: read_stream(nats_url, unique_name), timeout=30, what="the baseline")
    await pg.execute("INSERT INTO items SELECT i, 'bulk' FROM generate_series(100, 150099) i")

    async def transaction_half_published() -> bool:
        batches = [m.batch for m in await read_stream(nats_url, unique_name) if m.batch.kind is BatchKind.TRANSACTION]
        return len(batches) >= 3 and not any(b.end_lsn for b in batches)

    await eventually(transaction_half_published, timeout=60, what="the big transaction half published")
    await sigkill(process)
    running = start_app(make_app())
    await eventually(lambda: running.app.status.ready, timeout=30, what="resumed from the slot")
    await pg.execute("INSERT INTO items VALUES (-1, 'after the kill')")
    await eventually(lambda: has_item(nats_url, unique_name, -1), timeout=60, what="the change after the kill")
    messages = await read_stream(nats_url, unique_name)
    ids = [m.headers["Nats-Msg-Id"] for m in messages]
    assert len(ids) == len(set(ids)), "a chunk was stored twice"
    await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
    await running.stop_cleanly()


class BlackholeProxy:
    """A TCP proxy that can stop forwarding without closing anything: a network that silently drops."""

    def __init__(self, port: int) -> None:
        self._upstream_port = port
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._generation = 0
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def blackhole(self) -> None:
        """Connections open now never pass another byte; new ones work again after heal()."""
        self._generation += 1
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        await self._flowing.wait()
        generation = self._generation
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        self._writers += [client_writer, upstream_writer]
        await asyncio.gather(self._pump(client_reader, upstream_writer, generation),
                             self._pump(upstream_reader, client_writer, generation), return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, generation: int) -> None:
        while data := await reader.read(65536):
            if generation != self._generation:
                await asyncio.Event().wait()  # dropped: hold the connection open, forward nothing, forever
            writer.write(data)
            await writer.drain()
        writer.close()


async def test_a_silently_dropped_network_is_detected_and_streaming_resumes(
        pg, pg_dsn, pg_server, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    await create_items(pg_dsn, 50)
    proxy = BlackholeProxy(pg_server.port)
    await proxy.start()
    try:
        # The server gives up on the dropped walsender after 2s, which frees the slot for the new connection.
        dsn = f"host=127.0.0.1 port={proxy.port} user=postgres dbname={unique_name} " \
              "options='-c wal_sender_timeout=2s' connect_timeout=3"
        running = start_app(make_app(ingest_settings(connection=dsn, extra="sources.main.receive_timeout = 2s")))
        await eventually(lambda: running.app.status.ready, timeout=30, what="baseline done")
        proxy.blackhole()
        await pg.execute("INSERT INTO items VALUES (2001, 'sent into the void')")
        await eventually(lambda: running.app.status.restarts >= 1, timeout=30, what="the dead connection noticed")
        assert "nothing received from the server" in running.app.status.last_error
        proxy.heal()
        await pg.execute("INSERT INTO items VALUES (2002, 'after the network is back')")
        await eventually(lambda: has_item(nats_url, unique_name, 2002), timeout=60, what="streaming again")
        await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
        await running.stop_cleanly()
    finally:
        await proxy.close()
