"""A TCP proxy on loopback that injects network faults: cut connections, drop bytes in flight, stall a reader.

It runs its own event loop in a thread, so a busy test loop cannot slow the traffic it relays, and its methods
may be called from any thread. New connections go round-robin to the backends in rotation (a connection that
finds its backend down tries the next one), so one proxy also serves as a load balancer in front of several
instances of a service.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import struct
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from laredo_core.runtime import cancel
from laredo_testing.process import StartedInContext

__all__ = ["FaultProxy"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
CHUNK = 65536
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST and discards unsent bytes


@dataclass(eq=False)
class _Link:
    """One client connection and its backend connection."""

    backend: str
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            writer.transport.abort()


class FaultProxy(StartedInContext):
    """Relays 127.0.0.1:`port` to `backends` ("host:port"); faults: `cut`, `drop_next_upstream`, `stall`,
    `hold_upstream`."""

    def __init__(self, backends: str | Sequence[str], *, name: str = "proxy") -> None:
        self.name = name
        self.backends = [backends] if isinstance(backends, str) else list(backends)
        self.in_rotation = set(self.backends)
        self.port = 0
        self._turn = itertools.count()
        self._links: set[_Link] = set()
        self._drop_upstream = False
        self._flowing: asyncio.Event | None = None  # set: bytes from backends reach clients
        self._upstream_flowing: asyncio.Event | None = None  # set: bytes from clients reach backends
        self.held_chunks = 0  # chunks from clients waiting while held
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"fault-proxy {name}", daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- lifecycle (any thread) -----------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._start())
        logger.info("%s listening on %s for %s", self.name, self.address, ", ".join(self.backends))
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- faults (any thread) --------------------------------------------------------------------------------

    def cut(self) -> int:
        """Abort every open connection now (RST both ways, bytes in flight lost); returns how many."""
        return self._call(self._cut())

    def drop_next_upstream(self) -> None:
        """The next bytes a client sends are discarded and their connection aborted: a write the client counts
        as sent (a publish, say) never reaches the server."""
        self._loop.call_soon_threadsafe(setattr, self, "_drop_upstream", True)

    @property
    def dropping(self) -> bool:
        """True until a drop asked for by drop_next_upstream happened."""
        return self._drop_upstream

    def stall(self) -> None:
        """Stop relaying from backends to clients (the clients stop receiving; backends see TCP back-pressure);
        clients' bytes still reach the backends. Connections stay open."""
        self._loop.call_soon_threadsafe(_switch, self._flowing, False)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(_switch, self._flowing, True)

    def hold_upstream(self) -> None:
        """Keep what clients send from the backends, in order, until release_upstream(): the server sees those
        writes late, after anything other clients send meanwhile."""
        self._loop.call_soon_threadsafe(_switch, self._upstream_flowing, False)

    def release_upstream(self) -> None:
        self._loop.call_soon_threadsafe(_switch, self._upstream_flowing, True)

    # -- inside the proxy's loop ----------------------------------------------------------------------------

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    async def _start(self) -> None:
        self._flowing, self._upstream_flowing = asyncio.Event(), asyncio.Event()
        self._flowing.set()
        self._upstream_flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()

    async def _cut(self) -> int:
        links, self._links = list(self._links), set()
        for link in links:
            link.abort()
        for link in links:
            await cancel(link.tasks)
        return len(links)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected = await self._connect_backend()
        if connected is None:
            writer.transport.abort()
            return
        backend, (server_reader, server_writer) = connected
        link = _Link(backend, writer, server_writer)
        self._links.add(link)
        link.tasks = [asyncio.create_task(self._relay(link, reader, server_writer, upstream=True)),
                      asyncio.create_task(self._relay(link, server_reader, writer, upstream=False))]

    async def _connect_backend(self) -> tuple[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]] | None:
        candidates = [b for b in self.backends if b in self.in_rotation]
        start = next(self._turn)
        for i in range(len(candidates)):
            backend = candidates[(start + i) % len(candidates)]
            host, port = backend.rsplit(":", 1)
            try:
                return backend, await asyncio.open_connection(host, int(port))
            except OSError:
                continue
        return None

    async def _relay(self, link: _Link, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *,
                     upstream: bool) -> None:
        flowing = self._flowing if not upstream else self._upstream_flowing
        assert flowing is not None
        try:
            while data := await source.read(CHUNK):
                if not flowing.is_set():  # holding the chunk, reading no more: back-pressure on the sender
                    if upstream:
                        self.held_chunks += 1
                    await flowing.wait()
                if upstream and self._drop_upstream:
                    self._drop_upstream = False
                    logger.info("%s dropped %d bytes to %s and aborted the connection", self.name, len(data),
                                link.backend)
                    self._links.discard(link)
                    link.abort()
                    return
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.close()
            self._links.discard(link)


def _switch(event: asyncio.Event | None, on: bool) -> None:
    assert event is not None
    if on:
        event.set()
    else:
        event.clear()
