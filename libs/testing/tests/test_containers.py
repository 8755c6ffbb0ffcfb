"""Choosing between native processes and containers, and probing for a Docker engine."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from laredo_testing.containers import BACKEND_ENV, Backend, choose_backend, docker_reachable
from laredo_testing.process import free_port


def _never_called() -> bool:
    raise AssertionError("a forced backend must not probe Docker")


@pytest.mark.parametrize(
    ("env", "docker_up", "expected"),
    [
        ({}, False, Backend.PROCESS),
        ({}, True, Backend.CONTAINER),
        ({BACKEND_ENV: ""}, True, Backend.CONTAINER),
        ({BACKEND_ENV: "process"}, None, Backend.PROCESS),
        ({BACKEND_ENV: "container"}, None, Backend.CONTAINER),
        ({BACKEND_ENV: " Container "}, None, Backend.CONTAINER),
    ],
)
def test_choose_backend(env: dict[str, str], docker_up: bool | None, expected: Backend) -> None:
    probe = _never_called if docker_up is None else (lambda: docker_up)
    assert choose_backend(env, probe) is expected


def test_choose_backend_rejects_unknown_values_naming_the_variable() -> None:
    with pytest.raises(ValueError, match=f"{BACKEND_ENV}='docker' is not one of: process, container"):
        choose_backend({BACKEND_ENV: "docker"}, _never_called)


@pytest.fixture
def fake_docker_socket() -> Iterator[Path]:
    """A unix socket answering one request the way the Docker engine answers /_ping."""
    # Short directory: unix socket paths are limited to about 107 bytes.
    directory = Path(tempfile.mkdtemp(prefix="dock"))
    path = directory / "docker.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def answer_once() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    yield path
    server.close()
    shutil.rmtree(directory, ignore_errors=True)


def test_docker_reachable_when_the_engine_answers_ping(fake_docker_socket: Path) -> None:
    assert docker_reachable({"DOCKER_HOST": f"unix://{fake_docker_socket}"}) is True


@pytest.mark.parametrize(
    "docker_host",
    ["unix:///nonexistent/docker.sock", "tcp://127.0.0.1:{closed}", "ssh://user@host"],
)
def test_docker_not_reachable(docker_host: str) -> None:
    env = {"DOCKER_HOST": docker_host.format(closed=free_port())}
    assert docker_reachable(env, timeout=0.5) is False
