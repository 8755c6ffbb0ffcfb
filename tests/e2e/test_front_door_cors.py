"""Browsers on configured origins may call every port (CORS preflight and the call itself); others get no
CORS grant, so the browser refuses to show them the answer. Real front door (Envoy) in front of OAM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from laredo_oam.main import App

from tests.frontdoor.services import oam

ALLOWED = "https://console.example.com"
PATH = "/laredo.v1.TableSyncOAM/GetStatus"


@pytest.fixture
async def oam_app(tmp_path: Path) -> AsyncIterator[App]:
    async with oam(tmp_path, front_door=f'cors {{ allowed_origins = ["{ALLOWED}"] }}') as running:
        yield running.app


async def test_a_configured_origin_passes_preflight_and_reads_the_answer(oam_app: App) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{oam_app.grpc_port}") as http:
        preflight = await http.options(PATH, headers={
            "origin": ALLOWED, "access-control-request-method": "POST",
            "access-control-request-headers": "content-type,connect-protocol-version,authorization"})
        assert preflight.status_code in (200, 204)
        assert preflight.headers["access-control-allow-origin"] == ALLOWED
        allowed_headers = preflight.headers["access-control-allow-headers"].lower()
        for header in ("content-type", "connect-protocol-version", "authorization", "x-grpc-web"):
            assert header in allowed_headers
        answer = await http.post(PATH, content=b"{}", headers={"origin": ALLOWED, "content-type": "application/json",
                                                               "connect-protocol-version": "1"})
        assert answer.status_code == 200 and answer.json()["state"]
        assert answer.headers["access-control-allow-origin"] == ALLOWED
        assert "grpc-status" in answer.headers["access-control-expose-headers"]


async def test_another_origin_gets_no_grant(oam_app: App) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{oam_app.grpc_port}") as http:
        preflight = await http.options(PATH, headers={"origin": "https://evil.example.net",
                                                      "access-control-request-method": "POST"})
        assert "access-control-allow-origin" not in preflight.headers
        answer = await http.post(PATH, content=b"{}", headers={"origin": "https://evil.example.net",
                                                               "content-type": "application/json"})
        assert "access-control-allow-origin" not in answer.headers
