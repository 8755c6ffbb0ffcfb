"""Run Laredo services as real processes for end-to-end tests: config file, start, readiness, kill."""

from __future__ import annotations

import json
import random
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from laredo_testing.eventually import wait_until
from laredo_testing.process import free_port

import psycopg
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["ServiceProcess", "create_table", "free_port", "mixed_changes", "write_config"]

BIN = Path(sys.executable).parent


def write_config(path: Path, *, pg_dsn: str, nats_url: str, source_id: str, slot: str, prefix: str,
                 tables: list[str], fanout_port: int, health_ports: dict[str, int], extra: str = "") -> Path:
    """A complete HOCON config for one source and one fan-out target per table."""
    table_entries = ",\n".join(
        f'    {{ source = {source_id}, schema = {t.split(".")[0]}, table = {t.split(".")[1]}, '
        f"targets = [ {{ type = replication-fanout, heartbeat_interval = 1s }} ] }}"
        for t in tables
    )
    path.write_text(f"""
sources {{
  {source_id} {{
    type = postgresql
    connection = {json.dumps(pg_dsn)}
    slot_mode = stateful
    slot_name = {slot}
    status_interval = 1s
    reconnect {{ initial_backoff = 200ms, max_backoff = 2s }}
  }}
}}
tables = [
{table_entries}
]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {prefix} }}
ingest {{ health_host = 127.0.0.1, health_port = {health_ports["ingest"]} }}
fanout {{ grpc {{ host = 127.0.0.1, port = {fanout_port} }}, health_host = 127.0.0.1, health_port = {health_ports["fanout"]} }}
{extra}
""")
    return path


@dataclass
class ServiceProcess:
    """One `laredo-<name>` process with its log file."""

    name: str
    config: Path
    health_port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    extra_args: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n===== start #{self.starts} =====\n".encode())
        log.flush()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([str(BIN / f"laredo-{self.name}"), "--config", str(self.config),
                                      *self.extra_args], stdout=log, stderr=subprocess.STDOUT, env=env)

    def ready(self) -> bool:
        self.assert_running()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/health/ready", timeout=1) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_until(self.ready, timeout=timeout, what=f"laredo-{self.name} /health/ready answers 200 "
                   f"(log: {self.log_path})")

    def assert_running(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"laredo-{self.name} exited with {self.proc.returncode}; log tail:\n{self.log_tail()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"



@contextmanager
def serving(process: ServiceProcess, timeout: float = 90.0) -> Iterator[ServiceProcess]:
    """The process started and ready; stopped afterwards."""
    process.start()
    try:
        process.wait_ready(timeout)
        yield process
    finally:
        process.stop()


def mixed_changes(conn: psycopg.Connection, table: str, rnd: random.Random, live: list[int], next_id: int,
                  count: int, *, min_rows: int = 1) -> int:
    """`count` random inserts (40%), updates (40%) and deletes (20%) on (id, name, qty, note); returns next_id.

    `live` holds the ids present; inserts are forced while fewer than `min_rows` remain.
    """
    for _ in range(count):
        op = rnd.random()
        if op < 0.4 or len(live) < min_rows:
            conn.execute(f"INSERT INTO {table} (id, name, qty) VALUES (%s, %s, %s)",
                         (next_id, f"new {next_id}", rnd.randint(0, 1000)))
            live.append(next_id)
            next_id += 1
        elif op < 0.8:
            conn.execute(f"UPDATE {table} SET qty = %s, note = %s, updated_at = now() WHERE id = %s",
                         (rnd.randint(0, 1000), f"upd {rnd.random():.6f}", rnd.choice(live)))
        else:
            victim = live.pop(rnd.randrange(len(live)))
            conn.execute(f"DELETE FROM {table} WHERE id = %s", (victim,))
    return next_id


def create_table(dsn: str, table: str, rows: int) -> None:
    """(id, name, qty, note, updated_at) with `rows` rows; every fifth note is NULL."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text NOT NULL, qty int, "
                     "note text, updated_at timestamptz NOT NULL DEFAULT '2026-01-01 00:00:00+00')")
        conn.execute(f"INSERT INTO {table} (id, name, qty, note) SELECT g, 'row ' || g, g %% 97, "
                     "CASE WHEN g %% 5 = 0 THEN NULL ELSE md5(g::text) END FROM generate_series(1, %s::bigint) g",
                     (rows,))


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> tuple[Samples, dict[str, str]]:
    """Every sample of GET /metrics by (name, sorted labels), and each family's type."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=")
        text = answer.read().decode()
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples, types
