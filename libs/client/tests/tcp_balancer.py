"""A tiny TCP load balancer for tests: each new connection goes to the current backend; live ones stay put."""

from __future__ import annotations

import asyncio
import contextlib


class TcpBalancer:
    def __init__(self, backend: str) -> None:
        self.backend = backend  # "host:port" new connections are routed to
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def sever(self) -> None:
        """Cut every live connection (a network blip or a load balancer restart); new ones are accepted."""
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.backend.rsplit(":", 1)
        try:
            backend_reader, backend_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        for source, sink in ((reader, backend_writer), (backend_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.close()
