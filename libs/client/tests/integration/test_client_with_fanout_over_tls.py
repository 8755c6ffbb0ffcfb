"""LaredoClient against the real fan-out service behind its real front door (Envoy) serving mutual TLS, with
certificates made at test time: the client replicates with its CA and client certificate, and gets nothing
without the certificate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from laredo_testing.eventually import eventually

from laredo_client import BackoffPolicy, LaredoClient, TlsOptions
from libs.client.tests.integration.test_client_with_fanout import Fanout, fanout_on_stream
from libs.client.tests.tls_files import TlsFiles, write_tls_files
from services.fanout.tests.fanout_testkit import TABLE, insert, row

pytestmark = pytest.mark.integration


@pytest.fixture
def tls_files(tmp_path: Path) -> TlsFiles:
    return write_tls_files(tmp_path / "tls")


@pytest.fixture
async def mtls_fanout(nats_url: str, unique_name: str, tmp_path: Path, tls_files: TlsFiles) -> AsyncIterator[Fanout]:
    tls = (f'tls {{ cert = "{tls_files.server_cert}", key = "{tls_files.server_key}", '
           f'client_ca = "{tls_files.ca}", require_client_cert = true }}')
    async with fanout_on_stream(nats_url, unique_name, tmp_path, tls) as fanout:
        yield fanout


def client(fanout: Fanout, tls: TlsOptions) -> LaredoClient:
    return LaredoClient(f"localhost:{fanout.apps[0].grpc_port}", TABLE.schema, TABLE.name, tls=tls,
                        backoff=BackoffPolicy(initial=0.05, maximum=0.5), heartbeat_timeout=5)


async def test_a_client_with_its_certificate_replicates_over_mutual_tls(mtls_fanout: Fanout,
                                                                       tls_files: TlsFiles) -> None:
    await mtls_fanout.publish(mtls_fanout.batches.baseline([row(i) for i in range(1, 11)], chunk_rows=4))
    replica = client(mtls_fanout, TlsOptions.from_files(ca=tls_files.ca, cert=tls_files.client_cert,
                                                        key=tls_files.client_key))
    await replica.start()
    try:
        await replica.await_ready(15)
        assert replica.count() == 10
        await mtls_fanout.publish(mtls_fanout.batches.transaction(insert(row(11))))
        await eventually(lambda: replica.get(11) == row(11), what="a live change over TLS")
    finally:
        await replica.stop()


async def test_without_a_client_certificate_nothing_is_replicated(mtls_fanout: Fanout, tls_files: TlsFiles) -> None:
    await mtls_fanout.publish(mtls_fanout.batches.baseline([row(1)], chunk_rows=4))
    replica = client(mtls_fanout, TlsOptions.from_files(ca=tls_files.ca))
    await replica.start()
    try:
        with pytest.raises(TimeoutError, match="not ready"):
            await replica.await_ready(2)
        assert replica.count() == 0 and replica.stats.streams_opened >= 1
    finally:
        await replica.stop()
