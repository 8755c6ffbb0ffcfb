"""Every service, run as its console script, exits within its grace period when told to stop (SIGTERM) once its
NATS stopped answering (its process frozen, as behind a network partition: connections neither work nor fail)
while changes flowed, and its PostgreSQL is gone: nothing it waits on may keep it running."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from laredo_testing.eventually import wait_until
from laredo_testing.postgres import PostgresServer
from laredo_testing.process import free_port, log_tail
from laredo_testing.servers import NatsServer, RedisServer

from laredo_core.cli import CANCEL_GRACE, STOP_GRACE

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
#: What a service gets to exit after SIGTERM: its grace, then the cancellation's, and a margin for the interpreter.
EXIT_WITHIN = STOP_GRACE + CANCEL_GRACE + 10.0


@dataclass
class Backends:
    pg: PostgresServer
    nats: NatsServer
    redis: RedisServer
    dsn: str


@pytest.fixture
def backends(tmp_path: Path) -> Iterator[Backends]:
    """PostgreSQL, NATS and Redis of this test alone: the test takes them away."""
    for name in ("nats", "redis"):
        (tmp_path / name).mkdir()
    pg = PostgresServer().start()  # in a directory of its own that the postgres user can reach
    nats, redis = NatsServer(tmp_path / "nats").start(), RedisServer(tmp_path / "redis").start()
    dsn = pg.dsn_for("postgres")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.items (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO public.items SELECT g, 'n' || g FROM generate_series(1, 100) g")
    try:
        yield Backends(pg, nats, redis, dsn)
    finally:
        signal_tree(nats.pid, signal.SIGCONT)
        for server in (nats, redis, pg):
            server.close()


class ChangesFlowing:
    """A thread committing small transactions on the test table until PostgreSQL goes away."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self.committed = 0
        self._thread = threading.Thread(target=self._write, daemon=True)

    def __enter__(self) -> ChangesFlowing:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.join(30)

    def wait_for(self, count: int) -> None:
        wait_until(lambda: self.committed >= count or not self._thread.is_alive(), timeout=30,
                   what=f"{count} transactions committed")
        assert self.committed >= count, "the writer stopped early"

    def _write(self) -> None:
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                for i in itertools.count(1000, 50):
                    conn.execute("INSERT INTO public.items SELECT g, repeat('x', 500) "
                                 "FROM generate_series(%s::int, %s::int) g", (i, i + 49))
                    self.committed += 1
        except psycopg.OperationalError:
            pass  # PostgreSQL went away: that is the point


def signal_tree(pid: int | None, sig: signal.Signals) -> None:
    """Signal a server and its child processes (PostgreSQL serves each connection from a child)."""
    if pid is None:
        return
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    for each in (pid, *children):
        try:
            os.kill(each, sig)
        except ProcessLookupError:
            pass


def write_config(path: Path, backends: Backends, health: int) -> Path:
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = {json.dumps(backends.dsn)}, slot_name = slot_stop,
  status_interval = 1s }} }}
tables = [ {{ source = pg, schema = public, table = items, targets = [
  {{ type = replication-fanout }}, {{ type = indexed-memory }} ] }} ]
stream {{ nats_url = {json.dumps(backends.nats.url)}, subject_prefix = stop }}
redis {{ url = {json.dumps(backends.redis.url)}, key_prefix = stop }}
ingest {{ health_host = 127.0.0.1, health_port = {health} }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = {health} }}
query {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = {health} }}
oam {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = {health} }}
""")
    return path


def answers(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@pytest.mark.parametrize("service", ["ingest", "fanout", "query", "oam"])
def test_a_service_whose_backends_are_gone_stops_within_its_grace_period(service: str, backends: Backends,
                                                                        tmp_path: Path) -> None:
    health = free_port()
    config = write_config(tmp_path / "laredo.conf", backends, health)
    log_path = tmp_path / f"{service}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen([str(BIN / f"laredo-{service}"), "--config", str(config)], stdout=log,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_until(lambda: proc.poll() is not None or answers(health), timeout=60,
                   what=f"laredo-{service} to answer on its health port")
        assert proc.poll() is None, f"laredo-{service} exited early:\n{log_tail(log_path)}"
        if service == "ingest":  # streaming: the table's baseline is in NATS
            wait_until(lambda: "baseline" in log_path.read_text(errors="replace"), timeout=60,
                       what="ingest to publish the baseline")
        with ChangesFlowing(backends.dsn) as changes:
            changes.wait_for(20)
            signal_tree(backends.nats.pid, signal.SIGSTOP)
            changes.wait_for(changes.committed + 200)  # some MiB committed while NATS does not answer
            backends.pg.stop("immediate")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"laredo-{service} still runs {EXIT_WITHIN:g}s after SIGTERM with PostgreSQL and NATS "
                        f"gone:\n{log_tail(log_path, 60)}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
