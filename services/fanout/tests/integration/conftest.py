"""Fixtures of the fan-out integration tests: one JetStream stream per test (real NATS)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.fanout.tests.integration.fanout_cluster import Stream, stream_fixture


@pytest.fixture
async def stream(nats_url: str, unique_name: str) -> AsyncIterator[Stream]:
    async for value in stream_fixture(nats_url, unique_name):
        yield value
