"""Replicated stream on a 3-node JetStream cluster: the stream leader SIGKILLed under load loses nothing.

ingest, fan-out, query and OAM run as processes against the cluster (stream.nats_url lists the three nodes,
stream.replicas = 3) while a writer keeps committing. The stream's leader is killed mid-load and restarted
later. Afterwards a fan-out client and the query service equal SELECT * value by value, the stream holds
transactions in commit order, and ingest never confirmed to PostgreSQL a position the cluster had not stored
on a quorum: every transaction of the table whose commit ends at or before a confirmed_flush_lsn observed
during the run (PostgreSQL's own list, read from a test_decoding slot) is in the stream the surviving nodes
serve, checked once while the killed leader is still down and once at the end.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nats
import psycopg
import pytest

from laredo_kernel.changes import BatchKind, TableId
from laredo_kernel.position import format_lsn, parse_lsn
from laredo_core.stream.naming import HEADER_COMMIT_LSN, HEADER_END_LSN, HEADER_KIND, stream_name
from laredo_testing.eventually import eventually
from laredo_testing.nats_cluster import NatsCluster

from tests.e2e.harness import create_table
from tests.e2e.system import (
    SOURCE,
    ChangeWriter,
    System,
    SystemConfig,
    connected_replica,
    everyone_equals_the_table,
    running_system,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 300  # changes/s, in transactions of 10


@dataclass
class ConfirmedSamples:
    """confirmed_flush_lsn of ingest's slot, read every 100 ms from a thread until stopped."""

    dsn: str
    slot: str
    values: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def latest(self) -> int:
        return self.values[-1] if self.values else 0

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                   "WHERE slot_name = %s", (self.slot,)).fetchone()
                if row and row[0]:
                    self.values.append(parse_lsn(row[0]))
                self._stop.wait(0.1)  # the sampling cadence, not a wait for a condition

    @contextmanager
    def sampling(self) -> Iterator[ConfirmedSamples]:
        thread = threading.Thread(target=self.run, name="confirmed-sampler", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(10)


def audit_slot(table: TableId) -> str:
    """A test_decoding slot that lists what PostgreSQL committed (slot names are server-wide)."""
    return f"audit_{table.name}"


def committed_transactions(dsn: str, table: TableId) -> list[int]:
    """End LSN of every committed transaction that changed `table`, from the test_decoding slot (peeked)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_changes(%s, NULL, NULL)",
                            (audit_slot(table),)).fetchall()
    touched, ends = set(), []
    for lsn, xid, data in rows:
        if data.startswith(f"table {table}:"):
            touched.add(xid)
        elif data.startswith("COMMIT") and xid in touched:
            ends.append(parse_lsn(lsn))  # test_decoding reports a commit at the end of its record
    return ends


async def stored_transactions(urls: tuple[str, ...], stream: str) -> list[tuple[int, int]]:
    """(commit LSN, end LSN or 0) of every transaction message, in stream order, from the running nodes."""
    nc = await nats.connect(servers=list(urls), connect_timeout=5, max_reconnect_attempts=5)
    try:
        js = nc.jetstream(timeout=10)
        info = await js.stream_info(stream)
        stored = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            headers = (await js.get_msg(stream, seq)).headers or {}
            if headers.get(HEADER_KIND) == BatchKind.TRANSACTION.value:
                end = headers.get(HEADER_END_LSN)
                stored.append((parse_lsn(headers[HEADER_COMMIT_LSN]), parse_lsn(end) if end else 0))
        return stored
    finally:
        await nc.close()


async def assert_confirmed_positions_were_stored(dsn: str, table: TableId, urls: tuple[str, ...], stream: str,
                                                 confirmed: int, when: str) -> None:
    stored = await stored_transactions(urls, stream)
    commits = [commit for commit, _ in stored]
    backwards = [(format_lsn(a), format_lsn(b)) for a, b in zip(commits, commits[1:]) if b < a]
    assert not backwards, (f"{when}: the stream holds transactions out of commit order (commit LSN, then a "
                           f"lower one): {backwards[:5]}")
    in_stream = {end for _, end in stored if end}
    owed = [end for end in committed_transactions(dsn, table) if end <= confirmed]
    missing = [format_lsn(end) for end in owed if end not in in_stream]
    assert owed, f"{when}: no transaction ended at or before confirmed_flush_lsn {format_lsn(confirmed)}"
    assert not missing, (f"{when}: ingest confirmed {format_lsn(confirmed)} to PostgreSQL, but the cluster's "
                         f"stream lacks {len(missing)} of the {len(owed)} transactions ending at or before it, "
                         f"e.g. {missing[:5]}")


async def test_stream_leader_killed_under_load_loses_no_confirmed_change(
        pg_dsn: str, nats_cluster: NatsCluster, unique_name: str, tmp_path: Path) -> None:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 2_000)
    stream = stream_name(unique_name, SOURCE)
    config = SystemConfig(stream="replicas = 3")
    with running_system(pg_dsn, nats_cluster.url, unique_name, table, tmp_path, config=config) as system:
        cluster_info = nats_cluster.stream_cluster(stream)
        assert cluster_info is not None and len(cluster_info["replicas"]) == 2, f"not an R3 stream: {cluster_info}"
        system.sql("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (audit_slot(table),))
        samples = ConfirmedSamples(pg_dsn, f"slot_{unique_name}")
        async with connected_replica(system, "cluster-client") as rep:
            with samples.sampling():
                with ChangeWriter(pg_dsn, table, RATE, first_id=10_001, seed=23) as writer:
                    await eventually(lambda: writer.changes >= 1_000 and samples.latest() > 0, timeout=60,
                                     what="1,000 changes written and a confirmed position read before the kill")
                    # The cluster's methods block (HTTP polls, waits): in threads, so the client keeps reading.
                    leader = await asyncio.to_thread(nats_cluster.stream_leader, stream)
                    await asyncio.to_thread(leader.kill)
                    at_kill = await asyncio.to_thread(current_wal_lsn, pg_dsn)
                    assert await asyncio.to_thread(nats_cluster.stream_leader, stream) is not leader
                    await eventually(lambda: confirmed_past(system, samples, at_kill), timeout=90,
                                     what=f"ingest to confirm past {format_lsn(at_kill)} (the WAL at the kill) "
                                          f"while {leader.server_name} is down")
                    survivors = tuple(node.url for node in nats_cluster.running_nodes())
                    await assert_confirmed_positions_were_stored(pg_dsn, table, survivors, stream, samples.latest(),
                                                                 when=f"with {leader.server_name} down")
                    await asyncio.to_thread(leader.start)
                    restarted_at = writer.changes
                    await eventually(lambda: writer.changes >= restarted_at + 1_000, timeout=60,
                                     what="1,000 more changes written after the restart")
                await eventually(lambda: everyone_equals_the_table(system, rep), timeout=120,
                                 what="the fan-out client and the query service equal SELECT * after the failover")
                rep.check()  # its first stream still open, no gap
        await asyncio.to_thread(nats_cluster.wait_stream_replicated, stream, 3)
        await assert_confirmed_positions_were_stored(pg_dsn, table, nats_cluster.urls, stream, samples.latest(),
                                                     when="after the run")
        system.sql("SELECT pg_drop_replication_slot(%s)", (audit_slot(table),))


def confirmed_past(system: System, samples: ConfirmedSamples, lsn: int) -> bool:
    """Whether ingest confirmed beyond `lsn`; a service that exited is named, with its log, at the deadline."""
    system.assert_running()
    return samples.latest() > lsn


def current_wal_lsn(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return parse_lsn(row[0])
