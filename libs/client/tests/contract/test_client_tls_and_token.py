"""LaredoClient over TLS and mutual TLS, with a bearer token on every Sync call, against a real grpc.aio server
that records what each call carried."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from laredo_testing.eventually import eventually

from laredo_client import BearerToken, ClientFailed, LaredoClient, TlsOptions
from libs.client.tests.conftest import FAST_BACKOFF
from libs.client.tests.scripted_server import Abort, ScriptedReplicationServer, handshake, hold, pos, row, snapshot
from libs.client.tests.tls_files import TlsFiles, write_tls_files

TOKEN = "read-token-0123456789"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def serve(tls_files: TlsFiles) -> AsyncIterator[Callable[..., ScriptedReplicationServer]]:
    servers: list[ScriptedReplicationServer] = []

    async def start(*, require_client_cert: bool = False) -> ScriptedReplicationServer:
        server = ScriptedReplicationServer()
        await server.start(tls_files.server_credentials(require_client_cert=require_client_cert))
        servers.append(server)
        return server

    yield start  # type: ignore[misc]
    for server in servers:
        await server.stop()


def one_snapshot(server: ScriptedReplicationServer) -> None:
    server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1),
                 snapshot([row(1)], sequence=1, position=pos(1)), hold())


async def test_tls_with_a_token_replicates_and_sends_the_token(serve, clients, tls_files: TlsFiles) -> None:
    server = await serve()
    one_snapshot(server)
    client = LaredoClient(f"localhost:{server.port}", "public", "items", backoff=FAST_BACKOFF,
                          tls=TlsOptions.from_files(ca=tls_files.ca), token=TOKEN)
    clients.append(client)
    await client.start()
    await client.await_ready(10)
    assert client.get(1) == row(1)
    assert server.calls[0].received_metadata["authorization"] == f"Bearer {TOKEN}"


async def test_mutual_tls_and_a_rotated_token_file_on_the_next_stream(serve, clients, tls_files: TlsFiles,
                                                                      tmp_path: Path) -> None:
    server = await serve(require_client_cert=True)
    server.serve(handshake("FULL_SNAPSHOT", current=1, resume=1), snapshot([row(1)], sequence=1, position=pos(1)))
    one_snapshot(server)
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    tls = TlsOptions.from_files(ca=tls_files.ca, cert=tls_files.client_cert, key=tls_files.client_key,
                                server_name="localhost")
    client = LaredoClient(f"127.0.0.1:{server.port}", "public", "items", backoff=FAST_BACKOFF, tls=tls,
                          token=BearerToken.from_file(token_file))
    clients.append(client)
    await client.start()
    await client.await_ready(10)
    token_file.write_text("second-token\n")
    os.utime(token_file, ns=(token_file.stat().st_mtime_ns + 10**9,) * 2)
    await eventually(lambda: len(server.calls) == 2, timeout=10, what="a second Sync after the clean end")
    assert [c.received_metadata["authorization"] for c in server.calls] == ["Bearer first-token",
                                                                            "Bearer second-token"]


async def test_without_a_client_certificate_mutual_tls_is_not_reached(serve, clients, tls_files: TlsFiles) -> None:
    server = await serve(require_client_cert=True)
    one_snapshot(server)
    client = LaredoClient(f"localhost:{server.port}", "public", "items", backoff=FAST_BACKOFF,
                          tls=TlsOptions.from_files(ca=tls_files.ca), token=TOKEN)
    clients.append(client)
    await client.start()
    with pytest.raises(TimeoutError, match="not ready"):
        await client.await_ready(1)
    assert server.calls == [], "no call got through without the client certificate"


async def test_an_unauthenticated_answer_fails_the_client_with_a_hint(serve, clients, tls_files: TlsFiles) -> None:
    server = await serve()
    server.serve(Abort(grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required"))
    client = LaredoClient(f"localhost:{server.port}", "public", "items", backoff=FAST_BACKOFF,
                          tls=TlsOptions.from_files(ca=tls_files.ca))
    clients.append(client)
    await client.start()
    with pytest.raises(ClientFailed, match="requires a valid token: pass token="):
        await client.await_ready(10)
    assert "authorization" not in server.calls[0].received_metadata, "no token configured, none sent"


async def test_a_permission_denied_answer_names_the_role(serve, clients, tls_files: TlsFiles) -> None:
    server = await serve()
    server.serve(Abort(grpc.StatusCode.PERMISSION_DENIED, "role read does not cover public.items"))
    client = LaredoClient(f"localhost:{server.port}", "public", "items", backoff=FAST_BACKOFF,
                          tls=TlsOptions.from_files(ca=tls_files.ca), token=TOKEN)
    clients.append(client)
    await client.start()
    with pytest.raises(ClientFailed, match="role may not read this table") as raised:
        await client.await_ready(10)
    assert TOKEN not in str(raised.value)
