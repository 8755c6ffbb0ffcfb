"""TLS on the services' HTTP health listeners and on their own connections to NATS, Redis and S3, against real
servers that speak only TLS, with certificates made at test time: the configured CA (and client certificate)
connects; without them, or in cleartext, the connection fails with an error that says why."""

from __future__ import annotations

import asyncio
import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import nats
import pytest
from laredo_testing.eventually import eventually
from laredo_testing.process import free_port
from laredo_testing.stream import Batches

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.config import LaredoSettings, load_settings
from laredo_core.config.reader import Reader
from laredo_core.coordination.ports import CoordinationUnavailable, InstanceStatus
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_core.health import HealthServer
from laredo_core.snapshots.config import read_store_config
from laredo_core.snapshots.errors import SnapshotStoreUnavailable
from laredo_core.snapshots.factory import build_snapshot_store
from laredo_core.stream import naming
from laredo_core.stream.bounds import StreamBoundsUnavailable
from laredo_core.stream.feed import FeedSubscription
from laredo_core.stream.nats_bounds import NatsStreamBoundsReader
from laredo_core.stream.nats_feed import NatsChangeFeed
from laredo_core.tls import server_ssl_context
from laredo_core.tls_listener import TlsOnlyListener

from libs.core.tests.integration.test_nats_feed_restart import Recorder
from libs.core.tests.integration.tls_backends import (
    Certificates,
    TlsNatsServer,
    TlsRedisServer,
    TlsS3Server,
    make_certificates,
)

pytestmark = pytest.mark.integration

TABLE = TableId("public", "items")
COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),)
SOURCE = "pg"
VERIFY_FAILED = "CERTIFICATE_VERIFY_FAILED"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_nats(certificates: Certificates) -> Iterator[TlsNatsServer]:
    with TlsNatsServer(certificates) as server:
        yield server


@pytest.fixture(scope="module")
def tls_redis(certificates: Certificates) -> Iterator[TlsRedisServer]:
    with TlsRedisServer(certificates, verify_clients=True) as server:
        yield server


@pytest.fixture(scope="module")
def tls_s3(certificates: Certificates) -> Iterator[TlsS3Server]:
    with TlsS3Server(certificates) as server:
        yield server


def settings_from(tmp_path: Path, hocon: str) -> LaredoSettings:
    path = tmp_path / "laredo.conf"
    path.write_text(hocon)
    return load_settings(path, env={})


# HTTP health listeners


async def test_health_listener_answers_https_with_the_ca_and_refuses_cleartext(certificates: Certificates) -> None:
    health = HealthServer("127.0.0.1", 0, ready=lambda: (True, {}), tls=certificates.listener())
    await health.start()
    try:
        async with httpx.AsyncClient(verify=certificates.client_context(), timeout=5) as client:
            answer = await client.get(f"https://127.0.0.1:{health.port}/health/ready")
            assert (answer.status_code, answer.json()) == (200, {"ready": True})
        async with httpx.AsyncClient(timeout=5) as client:
            refused = await client.get(f"http://127.0.0.1:{health.port}/health/live")
            assert (refused.status_code, refused.text) == (426, "this port serves TLS only: connect with https://\n")
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=certificates.other_ca),
                                     timeout=5) as client:
            with pytest.raises(httpx.ConnectError, match=VERIFY_FAILED):
                await client.get(f"https://127.0.0.1:{health.port}/health/live")
    finally:
        await health.stop()
    assert health.scheme == "https"


async def test_health_listener_with_a_required_client_certificate(certificates: Certificates) -> None:
    tls = certificates.listener(client_ca=True, require_client_cert=True)
    health = HealthServer("127.0.0.1", 0, ready=lambda: (True, {}), tls=tls)
    await health.start()
    url = f"https://127.0.0.1:{health.port}/health/live"
    try:
        async with httpx.AsyncClient(verify=certificates.client_context(with_cert=True), timeout=5) as client:
            assert (await client.get(url)).json() == {"status": "ok"}
        async with httpx.AsyncClient(verify=certificates.client_context(), timeout=5) as client:
            with pytest.raises(httpx.TransportError):
                await client.get(url)
    finally:
        await health.stop()


class Greeter(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(b"hello")


async def test_tls_only_listener_closes_a_silent_connection_and_serves_others(certificates: Certificates) -> None:
    listener = TlsOnlyListener(Greeter, server_ssl_context(certificates.listener()), first_byte_timeout=0.3)
    await listener.start("127.0.0.1", 0)
    try:
        silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", listener.port)
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port, ssl=certificates.client_context(),
                                                       server_hostname="127.0.0.1")
        assert await asyncio.wait_for(reader.readexactly(5), 5) == b"hello"
        assert await asyncio.wait_for(silent_reader.read(), 5) == b""  # closed by the listener, nothing said
        for w in (writer, silent_writer):
            w.close()
    finally:
        await listener.close()


# NATS


async def publish_one(server: TlsNatsServer, prefix: str) -> int:
    """Create the source's stream and publish one change over TLS; its stream sequence."""
    nc = await nats.connect(server.url, tls=server.certificates.client_context(with_cert=server.verify_clients))
    try:
        js = nc.jetstream()
        await js.add_stream(name=naming.stream_name(prefix, SOURCE),
                            subjects=[naming.source_subject_filter(prefix, SOURCE)])
        batches = Batches(table=TABLE, columns=COLUMNS)
        ack = await js.publish(naming.table_subject(prefix, SOURCE, TABLE), batches.transaction(batches.insert({"id": 1})))
        return ack.seq
    finally:
        await nc.close()


async def test_change_feed_reads_a_tls_nats_with_the_configured_ca(tls_nats: TlsNatsServer, tmp_path: Path,
                                                                   unique_name: str) -> None:
    sequence = await publish_one(tls_nats, unique_name)
    settings = settings_from(tmp_path, f"""stream {{ nats_url = "{tls_nats.url}", subject_prefix = {unique_name},
                                           tls {{ ca = "{tls_nats.certificates.ca}" }} }}""")
    feed, sink = NatsChangeFeed(settings.stream.nats_urls, unique_name), Recorder()
    consuming = asyncio.create_task(feed.run([FeedSubscription(SOURCE, TABLE)], sink))
    try:
        await eventually(lambda: sink.sequences == [sequence], timeout=10, what="the change read over TLS")
    finally:
        consuming.cancel()
        await asyncio.gather(consuming, return_exceptions=True)


async def test_nats_without_the_ca_fails_on_the_certificate(tls_nats: TlsNatsServer, tmp_path: Path,
                                                            unique_name: str) -> None:
    settings = settings_from(tmp_path, f'stream {{ nats_url = "{tls_nats.url}" }}')  # the system's CAs
    reader = NatsStreamBoundsReader(settings.stream.nats_urls, unique_name)
    with pytest.raises(StreamBoundsUnavailable, match=VERIFY_FAILED):
        await reader.bounds(SOURCE, TABLE)
    await reader.aclose()


async def test_nats_in_cleartext_is_refused_when_tls_is_configured(nats_url: str, certificates: Certificates,
                                                                   tmp_path: Path, unique_name: str) -> None:
    settings = settings_from(tmp_path, f'stream {{ nats_url = "{nats_url}", tls {{ ca = "{certificates.ca}" }} }}')
    reader = NatsStreamBoundsReader(settings.stream.nats_urls, unique_name)
    with pytest.raises(StreamBoundsUnavailable, match="does not use TLS, but .* stream.tls asks for it"):
        await reader.bounds(SOURCE, TABLE)
    await reader.aclose()


async def test_nats_requiring_client_certificates(certificates: Certificates, tmp_path: Path,
                                                  unique_name: str) -> None:
    with TlsNatsServer(certificates, verify_clients=True) as server:
        sequence = await publish_one(server, unique_name)
        with_cert = settings_from(tmp_path, f"""stream {{ nats_url = "{server.url}", tls {{ ca = "{certificates.ca}",
                                  cert = "{certificates.client_cert}", key = "{certificates.client_key}" }} }}""")
        reader = NatsStreamBoundsReader(with_cert.stream.nats_urls, unique_name)
        assert (await reader.bounds(SOURCE, TABLE)).last_sequence == sequence
        await reader.aclose()
        without = settings_from(tmp_path, f'stream {{ nats_url = "{server.url}", tls {{ ca = "{certificates.ca}" }} }}')
        reader = NatsStreamBoundsReader(without.stream.nats_urls, unique_name)
        # "certificate required" (the server's alert), or the connection it closed before the alert was read
        with pytest.raises(StreamBoundsUnavailable, match="certificate required|requires a client certificate"):
            await reader.bounds(SOURCE, TABLE)
        await reader.aclose()


# Redis


def redis_settings(tmp_path: Path, server: TlsRedisServer, unique_name: str, tls: str) -> LaredoSettings:
    return settings_from(tmp_path, f'redis {{ url = "{server.url}", key_prefix = {unique_name}, tls {{ {tls} }} }}')


async def test_coordination_store_on_tls_redis_with_ca_and_client_certificate(
        tls_redis: TlsRedisServer, tmp_path: Path, unique_name: str) -> None:
    c = tls_redis.certificates
    settings = redis_settings(tmp_path, tls_redis, unique_name,
                              f'ca = "{c.ca}", cert = "{c.client_cert}", key = "{c.client_key}"')
    store = RedisCoordinationStore(settings.redis.url, settings.redis.key_prefix)
    try:
        await store.heartbeat(InstanceStatus("fanout", "one"), ttl=30)
        assert [i.instance_id for i in await store.instances("fanout")] == ["one"]
    finally:
        await store.aclose()


@pytest.mark.parametrize(("tls", "why"), [("", "certificate verify failed"),
                                           ('ca = "{other_ca}"', "certificate verify failed"),
                                           ('ca = "{ca}"', "connection reset by peer|certificate required")],
                         ids=["system CAs", "a CA that did not sign it", "no client certificate"])
async def test_tls_redis_refuses_a_client_without_the_right_ca_or_certificate(
        tls_redis: TlsRedisServer, tmp_path: Path, unique_name: str, tls: str, why: str) -> None:
    c = tls_redis.certificates
    settings = redis_settings(tmp_path, tls_redis, unique_name, tls.format(ca=c.ca, other_ca=c.other_ca))
    store = RedisCoordinationStore(settings.redis.url, settings.redis.key_prefix)
    try:
        with pytest.raises(CoordinationUnavailable, match="Redis at rediss://127.0.0.1:.* is unavailable") as raised:
            await store.instances("fanout")
        assert re.search(why, str(raised.value).lower()), raised.value
        assert "redis.tls.ca names the CA" in str(raised.value)
    finally:
        await store.aclose()


# S3


def s3_store_config(server: TlsS3Server, bucket: str, ca_file: str = "") -> dict[str, str]:
    config = {"endpoint": f"https://127.0.0.1:{server.port}", "bucket": bucket, "access_key": server.access_key,
              "secret_key": server.secret_key}
    return {**config, "ca_file": ca_file} if ca_file else config


async def test_s3_snapshot_store_over_https_with_a_private_ca(tls_s3: TlsS3Server, unique_name: str) -> None:
    problems: list[str] = []
    config = read_store_config("s3", Reader(s3_store_config(tls_s3, unique_name, str(tls_s3.certificates.ca)),
                                            "store_config", problems))
    assert not problems and config.secure
    store = build_snapshot_store(config)
    await store.write_part(TABLE, "s1", "rows-0.jsonl", b"{}\n")
    assert await store.list_snapshots(TABLE) == []  # no manifest yet: the part alone is no snapshot


async def test_s3_snapshot_store_without_the_ca_fails_on_the_certificate(tls_s3: TlsS3Server,
                                                                         unique_name: str) -> None:
    problems: list[str] = []
    store = build_snapshot_store(read_store_config("s3", Reader(s3_store_config(tls_s3, unique_name),
                                                                "store_config", problems)))
    with pytest.raises(SnapshotStoreUnavailable, match=VERIFY_FAILED):
        await store.list_snapshots(TABLE)


# A service as its console script


def snapshot_service_config(tmp_path: Path, nats: TlsNatsServer, prefix: str, health_port: int) -> Path:
    c = nats.certificates
    path = tmp_path / "laredo.conf"
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1" }} }}
tables = [ {{ source = pg, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{ type = replication-fanout,
  snapshot {{ store = local, store_config {{ path = "{tmp_path / 'snapshots'}" }} }} }} ] }} ]
stream {{ nats_url = "{nats.url}", subject_prefix = {prefix}, tls {{ ca = "{c.ca}" }} }}
tls {{ cert = "{c.server_cert}", key = "{c.server_key}" }}
snapshot {{ engine = sequential, interval = 1h, health_host = 127.0.0.1, health_port = {health_port} }}
""")
    return path


async def test_snapshot_service_serves_health_over_https_and_reads_nats_over_tls(
        tls_nats: TlsNatsServer, tmp_path: Path, unique_name: str) -> None:
    sequence = await publish_one(tls_nats, unique_name)
    port = free_port()
    log = tmp_path / "snapshot.log"
    proc = subprocess.Popen([str(Path(sys.executable).parent / "laredo-snapshot"), "--config",
                             str(snapshot_service_config(tmp_path, tls_nats, unique_name, port))],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        async with httpx.AsyncClient(verify=tls_nats.certificates.client_context(), timeout=2) as client:
            async def compacted() -> dict | None:
                assert proc.poll() is None, log.read_text()
                try:
                    body = (await client.get(f"https://127.0.0.1:{port}/health/ready")).json()
                except httpx.TransportError:
                    return None
                return body if body.get("passes", 0) >= 1 else None

            status = await eventually(compacted, timeout=60, what="the first pass, read from NATS over TLS")
        assert status["tables"][str(TABLE)]["stream_sequence"] == sequence
        async with httpx.AsyncClient(timeout=2) as cleartext:
            assert (await cleartext.get(f"http://127.0.0.1:{port}/health/live")).status_code == 426
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, log.read_text()
