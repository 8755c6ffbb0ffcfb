"""pytest plugin: lazily started session-wide servers plus per-test databases and names."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator
from types import FrameType
from typing import TypeVar

import pytest

from laredo_testing.containers import (Backend, MinioContainerServer, NatsContainerServer, PostgresContainerServer,
                                       RedisContainerServer, choose_backend, docker_reachable)
from laredo_testing.nats_cluster import NatsCluster
from laredo_testing.process import StartedInContext, close_all
from laredo_testing.servers import NatsServer, PostgresServer, RedisServer, S3Endpoint, S3Server

PgServer = PostgresServer | PostgresContainerServer
NatsLike = NatsServer | NatsContainerServer
RedisLike = RedisServer | RedisContainerServer
S3Like = S3Server | MinioContainerServer

MARKERS = {
    "integration": "integration: talks to real PostgreSQL, NATS, Redis or S3 servers started by fixtures",
    "slow": "slow: takes more than a few seconds",
}

S = TypeVar("S", bound=StartedInContext)


def pytest_configure(config: pytest.Config) -> None:
    declared = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    for name, line in MARKERS.items():
        if name not in declared:
            config.addinivalue_line("markers", line)
    _stop_servers_on_sigterm()


def pytest_unconfigure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _stop_servers_on_sigterm() -> None:
    """atexit does not run when a CI timeout sends SIGTERM, so stop servers, then die as asked."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _serve(server: S) -> Iterator[S]:
    with server:
        yield server


@pytest.fixture(scope="session")
def laredo_backend() -> Backend:
    """How servers run this session: native processes, or containers when Docker answers."""
    return choose_backend(os.environ, docker_reachable)


@pytest.fixture(scope="session")
def pg_server(laredo_backend: Backend) -> Iterator[PgServer]:
    """A PostgreSQL 15 server with wal_level=logical, shared by the whole session."""
    yield from _serve(PostgresServer() if laredo_backend is Backend.PROCESS else PostgresContainerServer())


@pytest.fixture
def pg_dsn(pg_server: PgServer, unique_name: str) -> Iterator[str]:
    """DSN of a fresh database named after `unique_name`, dropped with its slots afterwards."""
    dsn = pg_server.create_database(unique_name)
    yield dsn
    pg_server.drop_database(unique_name)


@pytest.fixture(scope="session")
def nats_server(laredo_backend: Backend) -> Iterator[NatsLike]:
    """A NATS server with JetStream enabled, shared by the whole session."""
    yield from _serve(NatsServer() if laredo_backend is Backend.PROCESS else NatsContainerServer())


@pytest.fixture(scope="session")
def nats_url(nats_server: NatsLike) -> str:
    return nats_server.url


@pytest.fixture
def nats_cluster() -> Iterator[NatsCluster]:
    """A 3-node JetStream cluster of its own (tests kill and restart its nodes), always as processes.

    Clients connect with `nats_cluster.urls` (or the comma-separated `nats_cluster.url`).
    """
    yield from _serve(NatsCluster(3))


@pytest.fixture(scope="session")
def redis_server(laredo_backend: Backend) -> Iterator[RedisLike]:
    """A Redis server without persistence, shared by the whole session."""
    yield from _serve(RedisServer() if laredo_backend is Backend.PROCESS else RedisContainerServer())


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisLike) -> str:
    return redis_server.url


@pytest.fixture(scope="session")
def s3_server(laredo_backend: Backend) -> Iterator[S3Like]:
    """An S3-compatible server (moto as a process, MinIO as a container), shared by the session."""
    yield from _serve(S3Server() if laredo_backend is Backend.PROCESS else MinioContainerServer())


@pytest.fixture(scope="session")
def s3_endpoint(s3_server: S3Like) -> S3Endpoint:
    return s3_server.endpoint


@pytest.fixture
def unique_name() -> str:
    """A short lowercase name, unique per test, valid as slot, stream, table, prefix and bucket name."""
    return f"t{uuid.uuid4().hex[:12]}"
