"""`laredo` sends the token with every call (unary and streams, OAM and Query) and connects with TLS and mutual
TLS, against scripted gRPC servers that record each call's authorization header."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from laredo.v1 import oam_pb2

from libs.cli.tests.cli_runner import Result, run_in_process, run_subprocess
from libs.cli.tests.fake_oam import FakeOamServer, start_fake_oam
from libs.client.tests.tls_files import TlsFiles, write_tls_files

TOKEN = "oam-admin-token-31415"
StartOam = Callable[..., Awaitable[FakeOamServer]]


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def start_oam() -> AsyncIterator[StartOam]:
    servers: list[FakeOamServer] = []

    async def start(credentials: grpc.ServerCredentials | None = None) -> FakeOamServer:
        servers.append(await start_fake_oam(credentials))
        return servers[-1]

    yield start
    for server in servers:
        await server.server.stop(None)


def no_secret(result: Result) -> None:
    assert TOKEN not in result.out + result.err, "the token is never printed"


async def test_the_token_goes_with_unary_and_streaming_calls(start_oam: StartOam) -> None:
    oam = await start_oam()
    oam.servicer.watch_events = [oam_pb2.WatchStatusResponse()]
    oam.servicer.watch_end = True
    for argv in (["status", "--json"], ["watch", "--count", "1"], ["--json", "tables"]):
        result = await run_in_process("--server", oam.address, "--token", TOKEN, *argv)
        assert result.code == 0, result
        no_secret(result)
    assert [m for m, _ in oam.recorder.calls] == ["GetStatus", "WatchStatus", "ListTables"]
    assert oam.recorder.authorizations() == [f"Bearer {TOKEN}"] * 3


async def test_no_token_no_header(start_oam: StartOam) -> None:
    oam = await start_oam()
    assert (await run_in_process("--server", oam.address, "status")).code == 0
    assert oam.recorder.authorizations() == [None, None]  # GetStatus, ListInstances


async def test_the_token_from_the_environment_and_a_file_in_a_real_process(start_oam: StartOam,
                                                                          tmp_path: Path) -> None:
    oam = await start_oam()
    token_file = tmp_path / "token"
    token_file.write_text("token-from-file\n")
    by_env = await run_subprocess("status", env={"LAREDO_SERVER": oam.address, "LAREDO_TOKEN": TOKEN})
    by_file = await run_subprocess("status", env={"LAREDO_SERVER": oam.address,
                                                  "LAREDO_TOKEN_FILE": str(token_file)})
    assert (by_env.code, by_file.code) == (0, 0), (by_env, by_file)
    no_secret(by_env)
    assert oam.recorder.authorizations() == [f"Bearer {TOKEN}"] * 2 + ["Bearer token-from-file"] * 2


async def test_the_query_service_gets_the_same_token(start_oam: StartOam) -> None:
    """A server without the Query service answers UNIMPLEMENTED, after the interceptor saw the call."""
    server = await start_oam()
    result = await run_in_process("--query-server", server.address, "--token", TOKEN, "count", "public.items")
    assert result.code == 7, result
    assert server.recorder.calls == [("CountRows", f"Bearer {TOKEN}")]


async def test_unauthenticated_and_permission_denied_exit_codes(start_oam: StartOam) -> None:
    oam = await start_oam()
    oam.servicer.fail("GetStatus", grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required")
    result = await run_in_process("--server", oam.address, "status", "--json")
    assert (result.code, result.out) == (9, ""), result
    assert result.err == (f"laredo: the OAM service at {oam.address} requires a token: pass --token or set "
                          f"LAREDO_TOKEN (or --token-file / LAREDO_TOKEN_FILE) (a bearer token is required)\n")
    oam.servicer.fail("ResetSource", grpc.StatusCode.PERMISSION_DENIED, "ResetSource needs the admin role")
    result = await run_in_process("--server", oam.address, "--token", TOKEN, "reset", "pg", "--yes")
    assert result.code == 10 and "the token's role is insufficient" in result.err, result
    no_secret(result)


async def test_tls_with_the_ca_and_mutual_tls_with_a_client_certificate(start_oam: StartOam,
                                                                        tls_files: TlsFiles) -> None:
    oam = await start_oam(tls_files.server_credentials(require_client_cert=True))
    address = f"localhost:{oam.port}"
    mutual = await run_in_process("--server", address, "--ca", str(tls_files.ca), "--cert",
                                  str(tls_files.client_cert), "--key", str(tls_files.client_key), "--token", TOKEN,
                                  "status")
    assert mutual.code == 0, mutual
    assert oam.recorder.authorizations() == [f"Bearer {TOKEN}"] * 2
    without_cert = await run_in_process("--server", address, "--ca", str(tls_files.ca), "status")
    assert without_cert.code == 11 and "--cert FILE --key FILE" in without_cert.err, without_cert
    stranger = await run_in_process("--server", address, "--ca", str(tls_files.ca), "--cert",
                                    str(tls_files.stranger_cert), "--key", str(tls_files.stranger_key), "status")
    assert stranger.code == 11 and "does not accept the client certificate" in stranger.err, stranger
    assert len(oam.recorder.calls) == 2, "no call got through without a trusted client certificate"


async def test_tls_needs_the_ca_and_a_cleartext_port_is_named(start_oam: StartOam, tls_files: TlsFiles) -> None:
    tls_oam = await start_oam(tls_files.server_credentials())
    untrusted = await run_in_process("--server", f"https://localhost:{tls_oam.port}", "status")
    assert untrusted.code == 11 and "--ca FILE" in untrusted.err and "not signed by a CA" in untrusted.err, untrusted
    trusted = await run_in_process("--server", f"https://localhost:{tls_oam.port}", "status",
                                   env={"LAREDO_CA": str(tls_files.ca)})
    assert trusted.code == 0, trusted
    cleartext_oam = await start_oam()
    mismatch = await run_in_process("--server", cleartext_oam.address, "--ca", str(tls_files.ca), "status")
    assert mismatch.code == 11 and "does not serve TLS" in mismatch.err, mismatch
