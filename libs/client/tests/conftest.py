"""Fixtures for the client library's tests: a scripted Replication server and clients with test timings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from laredo_client import BackoffPolicy, LaredoClient
from libs.client.tests.scripted_server import ScriptedReplicationServer

#: Short enough that reconnect paths run in milliseconds; jitter stays on, as in production.
FAST_BACKOFF = BackoffPolicy(initial=0.01, maximum=0.05, jitter=0.5)


@pytest.fixture
async def scripted_server() -> AsyncIterator[ScriptedReplicationServer]:
    server = ScriptedReplicationServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def make_client(scripted_server: ScriptedReplicationServer) -> AsyncIterator[Callable[..., LaredoClient]]:
    """Build LaredoClients for the scripted server (table public.items); each is stopped at the end."""
    clients: list[LaredoClient] = []

    def make(**options: Any) -> LaredoClient:
        options.setdefault("backoff", FAST_BACKOFF)
        options.setdefault("heartbeat_timeout", 5.0)
        client = LaredoClient(options.pop("address", scripted_server.address), "public", "items", **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.stop()


@pytest.fixture
async def clients() -> AsyncIterator[list[LaredoClient]]:
    """A list for the clients a test builds by hand; each is stopped at the end."""
    made: list[LaredoClient] = []
    yield made
    for client in made:
        await client.stop()
