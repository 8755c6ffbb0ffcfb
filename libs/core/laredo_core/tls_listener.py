"""A TCP listener that serves TLS only and tells cleartext HTTP clients so (426), like the front door's ports.

Each accepted connection's first byte is peeked at, not read: a TLS handshake record (0x16) goes on, untouched,
to the protocol (e.g. aiohttp's) over TLS; anything else gets one cleartext `426 Upgrade Required` naming the
problem, and is closed. A connection that sends nothing within `first_byte_timeout` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

from laredo_core.runtime import cancel

log = logging.getLogger(__name__)

TLS_HANDSHAKE = 0x16  # the content type of a TLS record that starts a handshake
TLS_ONLY = "this port serves TLS only: connect with https://"
_LINGER = 2.0  # seconds a refused client has to read the answer and close
_REFUSAL = (f"HTTP/1.1 426 Upgrade Required\r\nUpgrade: TLS/1.2, TLS/1.3\r\nConnection: close\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(TLS_ONLY) + 1}\r\n\r\n{TLS_ONLY}\n").encode()


class TlsOnlyListener:
    """Accepts on host:port (0: a free port, see .port) until close()."""

    def __init__(self, protocol_factory: Callable[[], asyncio.BaseProtocol], context: ssl.SSLContext, *,
                 first_byte_timeout: float = 10.0, handshake_timeout: float = 10.0) -> None:
        self._factory, self._context = protocol_factory, context
        self._first_byte_timeout, self._handshake_timeout = first_byte_timeout, handshake_timeout
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family, reuse_port=False)
        self._socket.setblocking(False)
        self.port = self._socket.getsockname()[1]
        self._accepting = asyncio.create_task(self._accept(self._socket), name=f"tls-listener:{self.port}")

    async def close(self) -> None:
        """Stop accepting and drop connections still being sorted; handed-over ones belong to their protocol."""
        await cancel((self._accepting, *self._connections))
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listening)
            task = asyncio.create_task(self._sort(conn))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _sort(self, conn: socket.socket) -> None:
        peer = _peer(conn)
        try:
            first = await asyncio.wait_for(_peek(conn), self._first_byte_timeout)
        except asyncio.CancelledError:
            conn.close()
            raise
        except (TimeoutError, OSError):
            conn.close()
            return
        if first and first[0] == TLS_HANDSHAKE:
            try:
                await asyncio.get_running_loop().connect_accepted_socket(
                    self._factory, conn, ssl=self._context, ssl_handshake_timeout=self._handshake_timeout)
            except (ssl.SSLError, OSError, TimeoutError) as exc:
                log.info("TLS handshake with %s failed: %s", peer, exc)
                conn.close()
            return
        if first:
            log.info("refused a cleartext request from %s on a TLS-only port (426)", peer)
            await _refuse(conn)
        conn.close()


async def _refuse(conn: socket.socket) -> None:
    """Answer 426, then read until the peer closes (a short while at most): closing with its request unread
    would reset the connection, and the client might lose the answer."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError, TimeoutError):
        await loop.sock_sendall(conn, _REFUSAL)
        conn.shutdown(socket.SHUT_WR)
        async with asyncio.timeout(_LINGER):
            while await loop.sock_recv(conn, 4096):
                pass


async def _peek(conn: socket.socket) -> bytes:
    """The first byte the peer sent, left in the socket for whoever reads next (b"": the peer closed)."""
    loop = asyncio.get_running_loop()
    while True:
        readable = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: readable.done() or readable.set_result(None))
        try:
            await readable
        finally:
            loop.remove_reader(conn.fileno())
        try:
            return conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            continue


def _peer(conn: socket.socket) -> str:
    try:
        host, port = conn.getpeername()[:2]
    except OSError:
        return "a closed connection"
    return f"{host}:{port}"
