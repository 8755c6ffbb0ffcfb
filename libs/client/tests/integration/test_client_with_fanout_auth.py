"""LaredoClient against the real fan-out service with bearer tokens configured, through its real front door over
TLS: a read token replicates; no token, an unknown token, or a token for other tables end the client with what
to do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from laredo_client import BackoffPolicy, BearerToken, ClientFailed, LaredoClient, TlsOptions
from libs.client.tests.integration.test_client_with_fanout import Fanout, fanout_on_stream
from libs.client.tests.tls_files import TlsFiles, write_tls_files
from services.fanout.tests.fanout_testkit import TABLE, row

pytestmark = pytest.mark.integration

READ_TOKEN = "fanout-read-" + "c3" * 16
OTHER_TABLES_TOKEN = "fanout-other-" + "d4" * 16


@pytest.fixture
def tls_files(tmp_path: Path) -> TlsFiles:
    return write_tls_files(tmp_path / "tls")


@pytest.fixture
async def fanout(nats_url: str, unique_name: str, tmp_path: Path, tls_files: TlsFiles) -> AsyncIterator[Fanout]:
    read, other = tmp_path / "read.token", tmp_path / "other.token"
    read.write_text(READ_TOKEN)
    other.write_text(OTHER_TABLES_TOKEN)
    config = f"""
tls {{ cert = "{tls_files.server_cert}", key = "{tls_files.server_key}" }}
auth {{ tokens = [
  {{ name = app, role = read, file = "{read}" }}
  {{ name = elsewhere, role = read, file = "{other}", tables = ["public.other"] }}
] }}
"""
    async with fanout_on_stream(nats_url, unique_name, tmp_path, config) as started:
        await started.publish(started.batches.baseline([row(i) for i in range(1, 6)], chunk_rows=4))
        yield started


def client(fanout: Fanout, tls_files: TlsFiles, made: list[LaredoClient],
           token: str | BearerToken | None) -> LaredoClient:
    made.append(LaredoClient(f"https://localhost:{fanout.apps[0].grpc_port}", TABLE.schema, TABLE.name,
                             tls=TlsOptions.from_files(ca=tls_files.ca), token=token,
                             backoff=BackoffPolicy(initial=0.05, maximum=0.5), heartbeat_timeout=5))
    return made[-1]


async def test_a_read_token_from_a_file_replicates(fanout: Fanout, tls_files: TlsFiles, clients: list[LaredoClient],
                                                   tmp_path: Path) -> None:
    token_file = tmp_path / "client.token"
    token_file.write_text(READ_TOKEN + "\n")
    replica = client(fanout, tls_files, clients, BearerToken.from_file(token_file))
    await replica.start()
    await replica.await_ready(15)
    assert replica.count() == 5


@pytest.mark.parametrize(("token", "expected"), [
    (None, "UNAUTHENTICATED.*requires a valid token: pass token="),
    ("not-a-token-of-this-service", "UNAUTHENTICATED.*requires a valid token"),
    (OTHER_TABLES_TOKEN, "PERMISSION_DENIED.*role may not read this table"),
])
async def test_refused_credentials_end_the_client_with_what_to_do(fanout: Fanout, tls_files: TlsFiles,
                                                                  clients: list[LaredoClient], token: str | None,
                                                                  expected: str) -> None:
    replica = client(fanout, tls_files, clients, token)
    await replica.start()
    with pytest.raises(ClientFailed, match=expected) as raised:
        await replica.await_ready(15)
    assert replica.count() == 0
    for secret in (READ_TOKEN, OTHER_TABLES_TOKEN):
        assert secret not in str(raised.value)
