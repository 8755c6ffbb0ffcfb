"""One NATS connection shared by the change publisher and the state store, opened on first use; it also
tells the use cases the server's max_payload (the MessageSizeLimit port)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from laredo_core.stream.nats_connect import connect_nats
from laredo_core.stream.nats_servers import NatsServers

from laredo_ingest.domain.errors import StreamSetupFailed

log = logging.getLogger(__name__)


class NatsConnection:
    """Connects lazily; nats-py reconnects on its own after that (publishes in between are buffered)."""

    def __init__(self, servers: Sequence[str], *, name: str = "laredo-ingest", connect_timeout: float = 5.0) -> None:
        self._servers = NatsServers.of(servers)
        self._name = name
        self._connect_timeout = connect_timeout
        self._client: Client | None = None
        self._lock = asyncio.Lock()
        self._closing = False

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None or self._client.is_closed:
                self._client = await self._connect()
            return self._client

    async def jetstream(self) -> JetStreamContext:
        return (await self.client()).jetstream()

    async def max_payload(self) -> int:
        """MessageSizeLimit: the server's max_payload (headers and payload of one message) from its INFO."""
        return int((await self.client()).max_payload or 0)

    async def close(self) -> None:
        self._closing = True
        if self._client is not None and not self._client.is_closed:
            client, self._client = self._client, None
            try:
                await client.drain()
            except Exception:  # noqa: BLE001 - shutting down: a failed drain must not hide the real outcome
                log.debug("NATS drain failed during close", exc_info=True)
                await client.close()

    async def _connect(self) -> Client:
        try:
            client = await connect_nats(
                self._servers, name=self._name, connect_timeout=self._connect_timeout,
                allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=1.0,
                error_cb=_log_error, disconnected_cb=self._disconnected, reconnected_cb=_log_reconnected)
        except (OSError, asyncio.TimeoutError, nats.errors.Error) as exc:
            raise StreamSetupFailed(
                f"cannot connect to NATS at {', '.join(self._servers)}: {exc!r}; check stream.nats_url and that "
                "nats-server runs with JetStream (-js)", retryable=True) from exc
        log.info("connected to NATS at %s", client.connected_url.netloc if client.connected_url else self._servers)
        return client

    async def _disconnected(self) -> None:
        if not self._closing:
            log.warning("NATS disconnected; reconnecting")


async def _log_error(exc: Exception) -> None:
    log.warning("NATS: %s", exc)


async def _log_reconnected() -> None:
    log.info("NATS reconnected")
