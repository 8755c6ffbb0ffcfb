"""Rolling restart of three fan-out instances under load: 100 library clients behind a load balancer, changes
flowing at LAREDO_ROLLING_RATE changes/s; each instance in turn is taken out of rotation, drained by SIGTERM
with --drain-grace, restarted and put back. Every client must end with a replica equal to the table, and no
client may have needed a full re-sync after its initial snapshot.

The default rate is 200 changes/s: on a 2-core machine the 100 Python clients together apply about 31,000
changes/s next to PostgreSQL, ingest and three fan-outs, so 1,000 changes/s (100,000 client applies/s) cannot
be sustained here; LAREDO_ROLLING_RATE=1000 runs the full load on a machine with more cores."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from laredo_testing.eventually import eventually
from libs.client.tests.tcp_balancer import TcpBalancer
from tests.e2e.client_swarm import COLUMNS, rows_hash
from tests.e2e.harness import ServiceProcess, create_table, free_port, mixed_changes, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
TARGET_RATE = int(os.environ.get("LAREDO_ROLLING_RATE", "200"))  # changes/s; see the module docstring
CHANGES_PER_TXN = 10
INITIAL_ROWS = 2_000
SWARMS, CLIENTS_PER_SWARM = 4, 25
DRAIN_GRACE = 10.0
FANOUTS = 3
MIN_RATE_SHARE = 0.95  # the writer must sustain this share of the target rate, or the test says so


class RotatingBalancer(TcpBalancer):
    """TcpBalancer over several backends: each new connection goes to the next backend still in rotation."""

    def __init__(self, backends: list[str]) -> None:
        super().__init__(backends[0])
        self.backends = backends
        self.in_rotation = set(backends)
        self._turn = 0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        choices = [b for b in self.backends if b in self.in_rotation]
        if choices:
            self._turn += 1
            self.backend = choices[self._turn % len(choices)]
        await super()._accept(reader, writer)


@dataclass
class PacedWriter:
    """Inserts, updates and deletes in transactions of CHANGES_PER_TXN, paced to `rate` changes/s."""

    dsn: str
    table: str
    rate: int
    changes: int = 0
    worst_lag: float = 0.0  # seconds the writer fell behind its schedule, at worst
    elapsed: float = 0.0
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="paced-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        if self.error is not None:
            raise self.error

    @property
    def sustained_rate(self) -> float:
        return self.changes / self.elapsed if self.elapsed else 0.0

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop() in the test
            self.error = exc

    def _write(self) -> None:
        rnd = random.Random(41)
        interval = CHANGES_PER_TXN / self.rate
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            live = [r[0] for r in conn.execute(f"SELECT id FROM {self.table}")]
            next_id = max(live) + 1
            started = time.monotonic()
            txn = 0
            while not self._stop.is_set():
                due = started + txn * interval
                lag = time.monotonic() - due
                self.worst_lag = max(self.worst_lag, lag)
                if lag < 0 and self._stop.wait(-lag):  # pacing to the schedule, not waiting for a condition
                    break
                with conn.transaction():
                    next_id = mixed_changes(conn, self.table, rnd, live, next_id, CHANGES_PER_TXN, min_rows=100)
                txn += 1
                self.changes += CHANGES_PER_TXN
                self.elapsed = time.monotonic() - started


class Swarm:
    """One `tests.e2e.client_swarm` process of CLIENTS_PER_SWARM clients."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name, self.log_path = name, log_path
        self.proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def start(self, address: str, table: str) -> None:
        schema, name = table.split(".")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.e2e.client_swarm", "--address", address, "--schema", schema,
            "--table", name, "--clients", str(CLIENTS_PER_SWARM), "--name", self.name, "--max-batch-size", "100",
            cwd=REPO_ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self.log_path.open("ab"), limit=16 * 1024 * 1024)

    async def read(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"client swarm {self.name} exited ({self.proc.returncode}); see {self.log_path}")
        return json.loads(line)

    async def report(self) -> list[dict[str, Any]]:
        assert self.proc is not None and self.proc.stdin is not None
        async with self._lock:
            self.proc.stdin.write(b"report\n")
            await self.proc.stdin.drain()
            return (await self.read())["clients"]

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


@dataclass
class Cluster:
    dsn: str
    table: str
    slot: str
    ingest: ServiceProcess
    fanouts: list[ServiceProcess]
    addresses: list[str]


def table_hash(dsn: str, table: str) -> str:
    with psycopg.connect(dsn) as conn:
        return rows_hash(conn.execute(f"SELECT {', '.join(COLUMNS)} FROM {table}").fetchall())


@pytest.fixture
def cluster(pg_dsn: str, nats_url: str, unique_name: str, tmp_path: Path) -> Iterator[Cluster]:
    table, slot = f"public.{unique_name}", f"slot_{unique_name}"
    create_table(pg_dsn, table, INITIAL_ROWS)
    grpc_ports = [free_port() for _ in range(FANOUTS)]
    health = {"ingest": free_port(), "fanout": free_port()}
    config = write_config(tmp_path / "laredo.conf", pg_dsn=pg_dsn, nats_url=nats_url, source_id="pg", slot=slot,
                          prefix=f"t{unique_name}", tables=[table], fanout_port=grpc_ports[0], health_ports=health)
    ingest = ServiceProcess("ingest", config, health["ingest"], tmp_path / "ingest.log")
    fanouts = []
    for i, port in enumerate(grpc_ports):
        health_port = health["fanout"] if i == 0 else free_port()
        fanouts.append(ServiceProcess("fanout", config, health_port, tmp_path / f"fanout-{i}.log", extra_args=[
            "--set", f"fanout.grpc.port={port}", "--set", f"fanout.health_port={health_port}",
            "--drain-grace", f"{DRAIN_GRACE:g}s"]))
    ingest.start()
    for fanout in fanouts:
        fanout.start()
    try:
        ingest.wait_ready()
        for fanout in fanouts:
            fanout.wait_ready()
        yield Cluster(pg_dsn, table, slot, ingest, fanouts, [f"127.0.0.1:{p}" for p in grpc_ports])
    finally:
        for fanout in fanouts:
            fanout.stop()
        ingest.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (slot,))


@pytest.fixture
async def balancer(cluster: Cluster) -> AsyncIterator[RotatingBalancer]:
    lb = RotatingBalancer(list(cluster.addresses))
    await lb.start()
    yield lb
    await lb.stop()


@pytest.fixture
async def swarms(cluster: Cluster, balancer: RotatingBalancer, tmp_path: Path) -> AsyncIterator[list[Swarm]]:
    group = [Swarm(f"swarm{i}", tmp_path / f"swarm{i}.log") for i in range(SWARMS)]
    try:
        for swarm in group:
            await swarm.start(balancer.address, cluster.table)
        hellos = await asyncio.wait_for(asyncio.gather(*(s.read() for s in group)), 180)
        not_ready = [h for h in hellos if not h.get("ready")]
        assert not not_ready, f"clients not ready: {json.dumps(not_ready)[:3000]}"
        yield group
    finally:
        await asyncio.gather(*(s.stop() for s in group), return_exceptions=True)


async def roll(fanout: ServiceProcess, address: str, balancer: RotatingBalancer) -> dict[str, float]:
    """Out of rotation, SIGTERM (GoAway + drain), exit, start again, ready, back into rotation."""
    assert fanout.proc is not None
    balancer.in_rotation.discard(address)
    began = time.monotonic()
    fanout.proc.send_signal(signal.SIGTERM)
    await eventually(lambda: fanout.proc.poll() is not None, timeout=DRAIN_GRACE + 20, interval=0.1,
                     what=f"fan-out {address} drained its clients and exited (log: {fanout.log_path})")
    drained = time.monotonic() - began
    assert fanout.proc.returncode == 0, f"fan-out {address} exited with {fanout.proc.returncode}"
    fanout.start()
    await asyncio.to_thread(fanout.wait_ready, 90)
    balancer.in_rotation.add(address)
    return {"drain_and_exit_s": round(drained, 2), "restart_ready_s": round(time.monotonic() - began - drained, 2)}


async def all_clients(swarms: list[Swarm]) -> list[dict[str, Any]]:
    reports = await asyncio.gather(*(s.report() for s in swarms))
    return [client for report in reports for client in report]


async def test_rolling_restart_of_three_fanouts_needs_no_full_resync(cluster: Cluster, balancer: RotatingBalancer,
                                                                     swarms: list[Swarm]) -> None:
    writer = PacedWriter(cluster.dsn, cluster.table, TARGET_RATE)
    writer.start()
    await eventually(lambda: writer.changes >= 2 * TARGET_RATE or writer.error, timeout=30,
                     what="two seconds' worth of changes written before the rolling restart")
    steps = []
    for fanout, address in zip(cluster.fanouts, cluster.addresses, strict=True):
        steps.append(await roll(fanout, address, balancer))
    writer.stop()
    expected = await asyncio.to_thread(table_hash, cluster.dsn, cluster.table)

    last: list[list[dict[str, Any]]] = []

    async def converged() -> list[dict[str, Any]] | None:
        last[:] = [await all_clients(swarms)]
        return last[0] if all(c["hash"] == expected for c in last[0]) else None

    writer_stopped = time.monotonic()
    summary = {"target_rate": TARGET_RATE, "sustained_rate": round(writer.sustained_rate, 1),
               "changes": writer.changes, "writer_seconds": round(writer.elapsed, 1),
               "writer_worst_lag_s": round(writer.worst_lag, 3), "steps": steps}
    print(f"\nrolling restart: {json.dumps(summary)}")
    try:
        clients = await eventually(converged, timeout=90, interval=1.0,
                                   what="every client's replica equals SELECT * of the table")
    except AssertionError as exc:
        behind = [(c["client"], c["rows"], c["position"], c["status"]) for c in (last[0] if last else [])
                  if c["hash"] != expected]
        raise AssertionError(f"{exc}\n{len(behind)} clients differ from the table, e.g. {behind[:5]}; entries "
                             f"applied by all clients: {sum(c['entries_applied'] for c in last[0]) if last else 0} "
                             f"(clients that fall ever further behind mean this machine cannot apply "
                             f"{SWARMS * CLIENTS_PER_SWARM} x {TARGET_RATE} changes/s)") from exc
    print(f"converged {time.monotonic() - writer_stopped:.1f}s after the writer stopped; clients: "
          + json.dumps(_client_totals(clients)))
    resyncs = [(c["client"], c["full_resyncs"], c["modes"]) for c in clients if c["full_resyncs"]]
    assert not resyncs, f"full re-syncs after the initial snapshot: {resyncs}"
    assert len(clients) == SWARMS * CLIENTS_PER_SWARM and not [c for c in clients if c["failure"]]
    assert writer.sustained_rate >= MIN_RATE_SHARE * TARGET_RATE, (
        f"the writer sustained only {writer.sustained_rate:.0f} changes/s of the {TARGET_RATE} asked for "
        f"(worst lag behind schedule {writer.worst_lag:.2f}s): this machine cannot offer the acceptance load")


def _client_totals(clients: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("handoffs", "reconnects", "streams_opened", "entries_applied", "entries_skipped", "sequence_gaps",
            "silent_streams", "full_snapshots")
    return {k: sum(c[k] for c in clients) for k in keys} | {"rows": clients[0]["rows"] if clients else 0}
