"""FaultProxy relays bytes, and injects its faults: cut, a dropped write, a stalled reader, a dead backend."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from laredo_testing.fault_proxy import FaultProxy
from laredo_testing.process import free_port


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(self.server.tag + data)  # type: ignore[attr-defined]
        except ConnectionResetError:
            pass  # the proxy's faults


@pytest.fixture
def echo_servers() -> Iterator[list[str]]:
    servers = []
    for tag in (b"A:", b"B:"):
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
        server.daemon_threads = True
        server.tag = tag  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


def connect(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.settimeout(5)
    return sock


def test_relays_round_robin_and_skips_a_dead_backend(echo_servers: list[str]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    with FaultProxy([echo_servers[0], dead, echo_servers[1]]) as proxy:
        replies = []
        for _ in range(3):
            with connect(proxy) as sock:
                sock.sendall(b"hi")
                replies.append(sock.recv(100))
        assert sorted(set(replies)) == [b"A:hi", b"B:hi"]
        proxy.in_rotation = {echo_servers[1]}
        with connect(proxy) as sock:
            sock.sendall(b"x")
            assert sock.recv(100) == b"B:x"


def test_cut_resets_open_connections(echo_servers: list[str]) -> None:
    with FaultProxy(echo_servers[0]) as proxy, connect(proxy) as sock:
        sock.sendall(b"one")
        assert sock.recv(100) == b"A:one"
        assert proxy.cut() == 1
        with pytest.raises(ConnectionResetError):
            sock.sendall(b"two")
            sock.recv(100)


def test_a_dropped_write_never_arrives_and_its_connection_is_aborted(echo_servers: list[str]) -> None:
    with FaultProxy(echo_servers[0]) as proxy, connect(proxy) as sock:
        proxy.drop_next_upstream()
        sock.sendall(b"lost")
        with pytest.raises(ConnectionResetError):
            assert sock.recv(100) == b""  # an orderly end would also mean the bytes were not echoed
        assert not proxy.dropping
        with connect(proxy) as again:
            again.sendall(b"kept")
            assert again.recv(100) == b"A:kept"


def test_a_stalled_reader_receives_nothing_until_resumed(echo_servers: list[str]) -> None:
    with FaultProxy(echo_servers[0]) as proxy, connect(proxy) as sock:
        sock.sendall(b"1")
        assert sock.recv(100) == b"A:1"
        proxy.stall()
        sock.sendall(b"2")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(100)
        proxy.resume()
        sock.settimeout(5)
        assert sock.recv(100) == b"A:2"
