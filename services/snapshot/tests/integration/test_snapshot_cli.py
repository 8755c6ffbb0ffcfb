"""`laredo-snapshot` as a process: --once compacts and exits 0 (1 when a table failed); serving answers health."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from laredo_testing.eventually import wait_until
from laredo_testing.process import free_port
from services.snapshot.tests.snapshot_testkit import TABLE, Batches, insert, jetstream, row

from laredo_core.snapshots.local_store import LocalSnapshotStore

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def config(tmp_path: Path, nats_url: str, prefix: str, health_port: int = 0, tables: str = "") -> Path:
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1" }} }}
tables = [ {{ source = pg, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{ type = replication-fanout,
  snapshot {{ store = local, store_config {{ path = "{tmp_path / 'snapshots'}" }} }} }} ] }} {tables} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
snapshot {{ engine = sequential, interval = 1h, health_host = 127.0.0.1, health_port = {health_port} }}
""")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "laredo-snapshot"), *args], capture_output=True, text=True, timeout=120)


async def test_once_compacts_and_exits(nats_url: str, unique_name: str, tmp_path: Path) -> None:
    async with jetstream(nats_url, unique_name) as stream:
        b = Batches()
        await stream.publish(b.baseline([row(i) for i in range(1, 4)]), b.transaction(insert(row(4))))
        path = config(tmp_path, nats_url, unique_name)
        assert run("--config", str(path), "--check-config").returncode == 0
        done = run("--config", str(path), "--once")
        assert done.returncode == 0, done.stderr
        (manifest,) = await LocalSnapshotStore(tmp_path / "snapshots").list_snapshots(TABLE)
        assert manifest.row_count == 4 and manifest.producer == "laredo-snapshot"
        again = run("--config", str(path), "--once")  # nothing new: exit 0, no second snapshot
        assert again.returncode == 0 and "no new snapshot" in again.stderr
        unknown = run("--config", str(path), "--once", "--table", "public.nope")
        assert unknown.returncode == 2 and "--table public.nope" in unknown.stderr


async def test_once_exits_1_when_a_table_fails(nats_url: str, unique_name: str, tmp_path: Path) -> None:
    path = config(tmp_path, nats_url, unique_name)  # no stream at all
    failed = run("--config", str(path), "--once")
    assert failed.returncode == 1 and "StreamUnavailable" in failed.stderr


async def test_serving_answers_health_and_compacts_at_start(nats_url: str, unique_name: str, tmp_path: Path) -> None:
    async with jetstream(nats_url, unique_name) as stream:
        await stream.publish(Batches().baseline([row(1)]))
        port = free_port()
        proc = subprocess.Popen([str(BIN / "laredo-snapshot"), "--config",
                                 str(config(tmp_path, nats_url, unique_name, port))],
                                stdout=subprocess.DEVNULL, stderr=(tmp_path / "log").open("w"))
        try:
            def ready() -> dict | None:
                assert proc.poll() is None, (tmp_path / "log").read_text()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=1) as r:
                        body = json.loads(r.read())
                except OSError:
                    return None
                return body if body["tables"]["public.items"].get("rows") == 1 else None

            status = wait_until(ready, timeout=60, what="ready, with the table compacted at start")
            assert status["passes"] >= 1
        finally:
            proc.terminate()
            assert proc.wait(30) == 0
