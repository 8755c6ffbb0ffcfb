"""`laredo` against the real OAM service through its real front door (Envoy) serving TLS and mutual TLS, with
certificates made at test time; the service's stores are in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from laredo_core.config import load_settings
from laredo_oam.adapters.memory import InMemoryCoordinationStore, MemoryChangeTail
from laredo_oam.main import App, build

from libs.cli.tests.cli_runner import run_in_process, run_subprocess
from libs.client.tests.tls_files import TlsFiles, write_tls_files

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@asynccontextmanager
async def running_oam(*sets: str, config: Path | None = None) -> AsyncIterator[App]:
    """The OAM service from `config` (a HOCON file; none: defaults) with `sets` applied, its port served by the
    front door."""
    app = build(load_settings(config, env={}, sets=list(sets)), store=InMemoryCoordinationStore(),
                change_tail=MemoryChangeTail(), grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1",
                health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    started = asyncio.create_task(app.started.wait())
    await asyncio.wait({task, started}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # start-up failed: its error
    assert started.done(), "the OAM service did not start within 30s"
    try:
        yield app
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@dataclass
class Oams:
    tls: App
    mtls: App
    cleartext: App


@pytest.fixture(scope="module")
async def oams(tls_files: TlsFiles) -> AsyncIterator[Oams]:
    """Started together, before any command runs: each start forks the front door (Envoy) from this process."""
    tls = (f"tls.cert={tls_files.server_cert}", f"tls.key={tls_files.server_key}")
    async with AsyncExitStack() as stack:
        yield Oams(tls=await stack.enter_async_context(running_oam(*tls)),
                   mtls=await stack.enter_async_context(running_oam(*tls, f"tls.client_ca={tls_files.ca}",
                                                                    "tls.require_client_cert=true")),
                   cleartext=await stack.enter_async_context(running_oam()))


@pytest.fixture
def tls_oam(oams: Oams) -> App:
    return oams.tls


@pytest.fixture
def mtls_oam(oams: Oams) -> App:
    return oams.mtls


async def test_status_over_tls_with_the_ca(tls_oam: App, tls_files: TlsFiles) -> None:
    result = await run_subprocess("status", "--json", "--server", f"https://localhost:{tls_oam.grpc_port}",
                                  env={"LAREDO_CA": str(tls_files.ca)})
    assert result.code == 0, result
    assert result.json()["state"] == "SERVICE_STATE_STARTING"
    by_ip = await run_in_process("--server", f"127.0.0.1:{tls_oam.grpc_port}", "--ca", str(tls_files.ca), "status")
    assert by_ip.code == 0 and by_ip.out.startswith("state:"), by_ip


async def test_without_the_ca_or_without_tls_the_cli_says_what_is_missing(tls_oam: App) -> None:
    untrusted = await run_subprocess("status", "--server", f"https://localhost:{tls_oam.grpc_port}")
    assert untrusted.code == 11, untrusted
    assert untrusted.err.startswith("laredo: ") and untrusted.err.count("\n") == 1, "one line: no grpc log lines"
    assert "not signed by a CA the CLI trusts" in untrusted.err and "--ca FILE" in untrusted.err, untrusted
    cleartext = await run_in_process("--server", f"localhost:{tls_oam.grpc_port}", "status")
    assert cleartext.code == 11, cleartext
    assert "serves TLS and the CLI connected without it: pass --tls" in cleartext.err, cleartext
    assert f"https://localhost:{tls_oam.grpc_port}" in cleartext.err


async def test_tls_against_a_cleartext_port_is_named(oams: Oams, tls_files: TlsFiles) -> None:
    result = await run_in_process("--server", f"localhost:{oams.cleartext.grpc_port}", "--ca", str(tls_files.ca),
                                  "status")
    assert result.code == 11 and "the port does not serve TLS" in result.err, result


async def test_mutual_tls_with_the_client_certificate(mtls_oam: App, tls_files: TlsFiles) -> None:
    address = f"localhost:{mtls_oam.grpc_port}"
    result = await run_subprocess("status", "--json", env={
        "LAREDO_SERVER": address, "LAREDO_CA": str(tls_files.ca), "LAREDO_CERT": str(tls_files.client_cert),
        "LAREDO_KEY": str(tls_files.client_key)})
    assert result.code == 0 and result.json()["state"] == "SERVICE_STATE_STARTING", result
    options = await run_in_process("--server", address, "--ca", str(tls_files.ca), "--cert",
                                   str(tls_files.client_cert), "--key", str(tls_files.client_key), "tables")
    assert options.code == 0, options


async def test_mutual_tls_without_or_with_an_unknown_client_certificate(mtls_oam: App, tls_files: TlsFiles) -> None:
    address = f"localhost:{mtls_oam.grpc_port}"
    missing = await run_in_process("--server", address, "--ca", str(tls_files.ca), "status")
    assert missing.code == 11 and "requires a client certificate: pass --cert FILE --key FILE" in missing.err, \
        missing
    stranger = await run_in_process("--server", address, "--ca", str(tls_files.ca), "--cert",
                                    str(tls_files.stranger_cert), "--key", str(tls_files.stranger_key), "status")
    assert stranger.code == 11 and "does not accept the client certificate" in stranger.err, stranger

