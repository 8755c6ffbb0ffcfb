"""A PostgreSQL change reaches a gRPC client: ingest and fan-out as real processes on real PG and NATS."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import psycopg
import pytest

from laredo_client import LaredoClient
from laredo_kernel.jsonvalue import row_to_json
from laredo_kernel.position import parse_lsn
from laredo_core.stream.naming import HEADER_COMMIT_LSN, HEADER_END_LSN, HEADER_KIND, stream_name
from laredo_testing.eventually import eventually

from tests.e2e.harness import ServiceProcess, create_table, free_port, mixed_changes, write_config
from tests.e2e.system import LibraryReplica

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLUMNS = "id, name, qty, note, updated_at"


@dataclass
class Pipeline:
    dsn: str
    nats_url: str
    table: str
    slot: str
    stream: str
    ingest: ServiceProcess
    fanout: ServiceProcess
    fanout_port: int

    @contextlib.asynccontextmanager
    async def client(self, client_id: str) -> AsyncIterator[LibraryReplica]:
        """The client library users run, ready (snapshot received)."""
        schema, table = self.table.split(".")
        async with LaredoClient(f"127.0.0.1:{self.fanout_port}", schema, table, client_id=client_id) as client:
            await client.await_ready(60)
            yield LibraryReplica(client)


def table_rows(dsn: str, table: str) -> dict[int, dict]:
    with psycopg.connect(dsn, options="-c TimeZone=UTC") as conn:
        cur = conn.execute(f"SELECT {COLUMNS} FROM {table}")
        names = [d.name for d in cur.description]
        return {r[0]: row_to_json(dict(zip(names, r))) for r in cur.fetchall()}


def apply_mixed_changes(dsn: str, table: str, transactions: int, per_txn: int, first_new_id: int,
                        seed: int = 7, pause: float = 0.0) -> None:
    """Inserts, updates and deletes in many transactions (2,000 changes for 200 x 10), `pause` s apart."""
    rnd = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        live = [r[0] for r in conn.execute(f"SELECT id FROM {table}")]
        next_id = first_new_id
        for _ in range(transactions):
            with conn.transaction():
                next_id = mixed_changes(conn, table, rnd, live, next_id, per_txn)
            if pause:
                time.sleep(pause)  # the offered load: changes keep arriving while clients connect


@pytest.fixture
def pipeline(pg_dsn: str, nats_url: str, unique_name: str, tmp_path: Path) -> Iterator[Pipeline]:
    table = f"public.{unique_name}"
    create_table(pg_dsn, table, 10_000)
    fanout_port = free_port()
    health = {"ingest": free_port(), "fanout": free_port()}
    config = write_config(tmp_path / "laredo.conf", pg_dsn=pg_dsn, nats_url=nats_url, source_id="pg",
                          slot=f"slot_{unique_name}", prefix=f"t{unique_name}", tables=[table],
                          fanout_port=fanout_port, health_ports=health)
    ingest = ServiceProcess("ingest", config, health["ingest"], tmp_path / "ingest.log")
    fanout = ServiceProcess("fanout", config, health["fanout"], tmp_path / "fanout.log")
    p = Pipeline(pg_dsn, nats_url, table, f"slot_{unique_name}", stream_name(f"t{unique_name}", "pg"),
                 ingest, fanout, fanout_port)
    ingest.start()
    fanout.start()
    try:
        ingest.wait_ready()
        fanout.wait_ready()
        yield p
    finally:
        fanout.stop()
        ingest.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (p.slot,))


@pytest.fixture
async def replica(pipeline: Pipeline) -> AsyncIterator[LibraryReplica]:
    async with pipeline.client("e2e-first") as rep:
        yield rep


async def replica_matches(rep: LibraryReplica, pipeline: Pipeline) -> bool:
    expected = await asyncio.to_thread(table_rows, pipeline.dsn, pipeline.table)
    return rep.rows() == expected  # and the client saw no gap, on the one stream it opened


async def test_replica_equals_table_after_baseline_and_mixed_changes(pipeline: Pipeline, replica: LibraryReplica):
    assert len(replica.rows()) == 10_000
    await asyncio.to_thread(apply_mixed_changes, pipeline.dsn, pipeline.table, 200, 10, 10_001)
    await eventually(lambda: replica_matches(replica, pipeline), timeout=60,
                     what="the client's replica equals SELECT * of the table")
    assert replica.client.stats.entries_applied >= 2_000


async def test_second_client_mid_stream_gets_snapshot_then_contiguous_tail(pipeline: Pipeline,
                                                                           replica: LibraryReplica):
    writer = asyncio.create_task(asyncio.to_thread(apply_mixed_changes, pipeline.dsn, pipeline.table,
                                                   200, 10, 10_001, 11, 0.02))
    await eventually(lambda: replica.client.stats.entries_applied > 300, timeout=60,
                     what="changes flowing to client 1")
    async with pipeline.client("e2e-second") as second:
        assert not writer.done(), "the writer finished before the second client connected: slow it down"
        await writer
        await eventually(lambda: replica_matches(second, pipeline), timeout=60,
                         what="the second client's replica equals the table")
        assert second.client.stats.modes[0] == "FULL_SNAPSHOT", second.client.stats
        assert second.client.stats.entries_applied > 0
    assert await replica_matches(replica, pipeline)


async def acked_end_lsns(nats_url: str, stream: str) -> list[tuple[int, int]]:
    """(stream sequence, LSN) of every message that completes a transaction or a baseline."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            headers = msg.headers or {}
            end = headers.get(HEADER_END_LSN)
            if not end and headers.get(HEADER_KIND) == "BASELINE_END":
                end = headers.get(HEADER_COMMIT_LSN)  # the slot starts at the baseline's consistent point
            if end:
                found.append((seq, parse_lsn(end)))
        return found
    finally:
        await nc.close()


async def stream_last_seq(nats_url: str, stream: str) -> int:
    nc = await nats.connect(nats_url)
    try:
        return (await nc.jetstream().stream_info(stream)).state.last_seq
    finally:
        await nc.close()


def confirmed_flush(dsn: str, slot: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                           (slot,)).fetchone()
    return parse_lsn(row[0]) if row and row[0] else 0


async def test_ingest_killed_twice_mid_stream_loses_nothing(pipeline: Pipeline, replica: LibraryReplica):
    samples: list[tuple[int, int]] = []  # (confirmed_flush_lsn, stream last seq read just after)
    stop_sampling = asyncio.Event()

    async def sample() -> None:
        while not stop_sampling.is_set():
            confirmed = await asyncio.to_thread(confirmed_flush, pipeline.dsn, pipeline.slot)
            samples.append((confirmed, await stream_last_seq(pipeline.nats_url, pipeline.stream)))
            await asyncio.sleep(0.05)  # sampling cadence, not a wait for a condition

    sampler = asyncio.create_task(sample())
    writer = asyncio.create_task(asyncio.to_thread(apply_mixed_changes, pipeline.dsn, pipeline.table,
                                                   200, 10, 10_001, 13, 0.02))
    for kill_after in (400, 1200):
        await eventually(lambda n=kill_after: replica.client.stats.entries_applied >= n, timeout=60,
                         what=f"{kill_after} changes reached the client before the kill")
        pipeline.ingest.kill()
        pipeline.ingest.start()
        await asyncio.to_thread(pipeline.ingest.wait_ready)
    await writer
    await eventually(lambda: replica_matches(replica, pipeline), timeout=90,
                     what="the replica equals the table after two SIGKILLs of ingest")
    stop_sampling.set()
    await sampler
    first_seq_of: dict[int, int] = {}
    for seq, end in await acked_end_lsns(pipeline.nats_url, pipeline.stream):
        first_seq_of.setdefault(end, seq)
    for confirmed, last_seq in samples:
        # Everything the slot may now skip (ending at or before confirmed_flush_lsn) was already in JetStream.
        unacked = [f"{end:X}" for end, seq in first_seq_of.items() if end <= confirmed and seq > last_seq]
        assert not unacked, (f"confirmed_flush_lsn {confirmed:X} passed transactions JetStream had not acked "
                             f"yet: {unacked[:5]}")
    assert pipeline.ingest.starts == 3

