"""One running service per test module, behind its front door, shared by the module's protocol cases."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.frontdoor import services
from tests.frontdoor.services import Running


@pytest.fixture(scope="module")
async def oam_door(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    async with services.oam(tmp_path_factory.mktemp("oam")) as running:
        yield running


@pytest.fixture(scope="module")
async def query_door(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    async with services.query(tmp_path_factory.mktemp("query")) as running:
        yield running


@pytest.fixture(scope="module")
async def fanout_door(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    async with services.fanout(tmp_path_factory.mktemp("fanout")) as running:
        yield running
