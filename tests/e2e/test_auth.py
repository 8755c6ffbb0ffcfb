"""Authentication and roles on every service port, through the real front door, on gRPC, Connect and gRPC-Web.

OAM, Query and fan-out Replication run as their composition roots build them (in-memory backends), each
behind its own Envoy. With tokens configured: every RPC of every service name is refused without a token
(UNAUTHENTICATED), every admin RPC with a read token (PERMISSION_DENIED) and passes with an admin token; a
token limited to a table reaches that table only. The same with client certificates (mutual TLS) and JWTs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from laredo.replication.v1 import replication_pb2 as rpb
from laredo.v1 import query_pb2 as qpb
from laredo_core.auth.rules import (OAM_RULES, OAM_SERVICES, QUERY_SERVICES, REPLICATION_SERVICES, API_RULES)
from laredo_testing.protocols import CallError, Caller, TlsClient, method_types

from libs.core.tests.auth_keys import AUDIENCE, ISSUER, rsa_key, write_jwks
from tests.frontdoor import services
from tests.frontdoor.services import Running

pytestmark = pytest.mark.integration

ADMIN_TOKEN, READ_TOKEN = "admin-token-for-tests-0001", "read-token-for-tests-00001"
ITEMS_TOKEN = "items-only-token-for-tests-01"
PROTOCOLS = ("grpc", "connect-http1-json", "connect-http2-proto", "grpc-web")
REFUSED = ("UNAUTHENTICATED", "PERMISSION_DENIED")
ADMIN_METHODS = tuple(f"/{s}/{m}" for s in OAM_SERVICES for m, rule in OAM_RULES.items() if rule.role.label == "admin")
#: Admin RPCs that command absent instances (PauseSync, ReloadAll) wait this long before answering.
QUICK_COMMANDS = "oam { command_timeout = 300ms }"
STREAM_WAIT = 1.5  # a stream that neither answers nor fails within this was let through


def every_method() -> list[tuple[str, str]]:
    """(service kind, "/Service/Method") for every method of every service name."""
    kinds = {OAM_SERVICES: "oam", QUERY_SERVICES: "query", REPLICATION_SERVICES: "fanout"}
    return [(kinds[names], f"/{service}/{method.name}") for names, _ in API_RULES for service in names
            for method in descriptor_pool.Default().FindServiceByName(service).methods]


async def outcome(caller: Caller, method: str, request: object | None = None) -> str:
    """OK, OPEN (a stream let through and still open) or the error code of one call."""
    request_type, _, streaming = method_types(method)
    message = request if request is not None else request_type()
    wait = asyncio.timeout(STREAM_WAIT if streaming else None)
    try:
        async with wait:
            if streaming:
                await caller.stream(method, message, limit=1)
            else:
                await caller.unary(method, message)
        return "OK"
    except TimeoutError:
        return "OPEN"
    except CallError as exc:
        return "OPEN" if wait.expired() else exc.code  # a client may report our own cancel as CANCELED


@dataclass
class Doors:
    oam: Running
    query: Running
    fanout: Running

    def address(self, kind: str) -> str:
        return getattr(self, kind).address


@contextlib.asynccontextmanager
async def three_doors(directory: Path, extra: str) -> AsyncIterator[Doors]:
    extra += f"\n{QUICK_COMMANDS}"
    async with contextlib.AsyncExitStack() as stack:
        oam = await stack.enter_async_context(services.oam(directory / "oam", extra=extra))
        query = await stack.enter_async_context(services.query(directory / "query", extra=extra))
        fanout = await stack.enter_async_context(services.fanout(directory / "fanout", extra=extra))
        yield Doors(oam, query, fanout)


def _directory(factory: pytest.TempPathFactory, name: str) -> Path:
    root = factory.mktemp(name)
    for kind in ("oam", "query", "fanout"):
        (root / kind).mkdir()
    return root


# -- bearer tokens -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
async def token_doors(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Doors]:
    root = _directory(tmp_path_factory, "tokens")
    for name, secret in (("admin", ADMIN_TOKEN), ("read", READ_TOKEN), ("items", ITEMS_TOKEN)):
        (root / name).write_text(secret + "\n")
    extra = f"""auth {{ tokens = [
      {{ name = operator, role = admin, file = "{root}/admin" }}
      {{ name = reader, role = read, file = "{root}/read" }}
      {{ name = items-reader, role = read, file = "{root}/items", tables = [public.items] }}
    ] }}"""
    async with three_doors(root, extra) as doors:
        yield doors


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_rpc_is_refused_without_a_token(token_doors: Doors, protocol: str) -> None:
    wrong = {}
    for kind, method in every_method():
        caller = Caller(token_doors.address(kind), protocol, timeout=5)
        try:
            request_type, _, streaming = method_types(method)
            if streaming:
                await caller.stream(method, request_type(), limit=1)
            else:
                await caller.unary(method, request_type())
            wrong[method] = "answered"
        except CallError as exc:
            if exc.code != "UNAUTHENTICATED" or "authorization: Bearer <token>" not in exc.message:
                wrong[method] = str(exc)
    assert not wrong, f"{protocol}: not refused as UNAUTHENTICATED: {wrong}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_unknown_token_is_refused(token_doors: Doors, protocol: str) -> None:
    caller = Caller(token_doors.oam.address, protocol, headers=bearer("not-a-token-we-know-0001"), timeout=5)
    assert await outcome(caller, "/laredo.v1.TableSyncOAM/GetStatus") == "UNAUTHENTICATED"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_admin_rpc_is_refused_with_a_read_token(token_doors: Doors, protocol: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    caller = Caller(token_doors.oam.address, protocol, headers=bearer(READ_TOKEN), timeout=5)
    wrong = {}
    with caplog.at_level(logging.WARNING, logger="laredo_core.auth.interceptor"):
        for method in ADMIN_METHODS:
            with pytest.raises(CallError) as caught:
                await caller.unary(method, method_types(method)[0]())
            expected = f"credential 'reader' (role read) may not call {method}: it needs role admin"
            if caught.value.code != "PERMISSION_DENIED" or caught.value.message != expected:
                wrong[method] = str(caught.value)
    assert not wrong, f"{protocol}: {wrong}"
    refusals = [r.getMessage() for r in caplog.records if r.name == "laredo_core.auth.interceptor"]
    assert len(refusals) == len(ADMIN_METHODS), "\n".join(refusals)  # once each
    # the peer is what the door appends to x-forwarded-for (for a loopback client, this host's own address)
    assert all(re.search(r"from [0-9a-f.:]+ \(credential reader\): PERMISSION_DENIED", line) for line in refusals), \
        refusals
    assert not any(READ_TOKEN in line for line in refusals)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_admin_rpc_passes_with_an_admin_token(token_doors: Doors, protocol: str) -> None:
    caller = Caller(token_doors.oam.address, protocol, headers=bearer(ADMIN_TOKEN), timeout=8)
    refused = {m: code for m in ADMIN_METHODS if (code := await outcome(caller, m)) in REFUSED}
    assert not refused, f"{protocol}: the admin token was refused: {refused}"


@pytest.mark.parametrize("protocol", ("grpc", "connect-http1-json"))
async def test_every_read_rpc_passes_with_a_read_token(token_doors: Doors, protocol: str) -> None:
    refused = {}
    for kind, method in every_method():
        if method in ADMIN_METHODS:
            continue
        caller = Caller(token_doors.address(kind), protocol, headers=bearer(READ_TOKEN), timeout=5)
        if (code := await outcome(caller, method)) in REFUSED:
            refused[method] = code
    assert not refused, f"{protocol}: the read token was refused: {refused}"


@pytest.mark.parametrize("protocol", ("grpc", "connect-http1-json", "grpc-web"))
async def test_a_token_limited_to_a_table_reaches_only_that_table(token_doors: Doors, protocol: str) -> None:
    items = {"schema": "public", "table": "items"}
    other = {"schema": "public", "table": "orders"}

    def call(kind: str) -> Caller:
        return Caller(token_doors.address(kind), protocol, headers=bearer(ITEMS_TOKEN), timeout=5)

    query, fanout, oam = call("query"), call("fanout"), call("oam")
    count = "/laredo.v1.TableSyncQuery/CountRows"
    assert await outcome(query, count, qpb.CountRowsRequest(**items)) not in REFUSED
    assert await outcome(query, count, qpb.CountRowsRequest(table="items")) not in REFUSED  # schema public
    with pytest.raises(CallError) as caught:
        await query.unary(count, qpb.CountRowsRequest(**other))
    assert caught.value.code == "PERMISSION_DENIED"
    assert caught.value.message == f"credential 'items-reader' is limited to public.items; {count} names public.orders"
    sync = "/laredo.replication.v1.TableSyncReplication/Sync"
    assert await outcome(fanout, sync, rpb.SyncRequest(**items)) in ("OK", "OPEN")
    assert await outcome(fanout, sync, rpb.SyncRequest(**other)) == "PERMISSION_DENIED"
    assert await outcome(fanout, "/laredo.replication.v1.TableSyncReplication/FetchSnapshot") == "PERMISSION_DENIED"
    with pytest.raises(CallError) as caught:
        await oam.unary("/laredo.v1.LaredoOAMService/GetStatus", method_types(
            "/laredo.v1.LaredoOAMService/GetStatus")[0]())
    assert caught.value.code == "PERMISSION_DENIED" and "spans every table" in caught.value.message


async def test_health_is_open_and_reflection_needs_read(token_doors: Doors) -> None:
    async with grpc.aio.insecure_channel(token_doors.oam.address) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.ServerReflectionInfo(iter([ask]), timeout=5):
                pass
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        answers = [a async for a in stub.ServerReflectionInfo(iter([ask]), timeout=5,
                                                              metadata=tuple(bearer(ITEMS_TOKEN).items()))]
        names = {s.name for s in answers[0].list_services_response.service}
        assert set(OAM_SERVICES) <= names


# -- mutual TLS ----------------------------------------------------------------------------------------------
@dataclass
class Certificates:
    ca: bytes
    clients: dict[str, tuple[bytes, bytes]]  # name -> (certificate chain, key)
    files: dict[str, Path]

    def tls(self, client: str | None) -> TlsClient:
        cert, key = self.clients[client] if client else (None, None)
        return TlsClient(self.ca, cert, key)


def _uri_certificate(ca: trustme.CA, uri: str) -> tuple[bytes, bytes]:
    """A client certificate naming its workload only by a URI SAN (SPIFFE style), signed by the test CA."""
    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "laredo tests")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    where = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    files = {"ca": where / "ca.pem", "cert": where / "server.pem", "key": where / "server.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["cert"]))
    server.private_key_pem.write_to_path(str(files["key"]))
    clients = {}
    for name in ("ops-client", "stranger"):
        leaf = ca.issue_cert(f"{name}.example.org", common_name=name)
        clients[name] = (leaf.cert_chain_pems[0].bytes(), leaf.private_key_pem.bytes())
    clients["reader"] = _uri_certificate(ca, "spiffe://example.org/reader")
    return Certificates(ca.cert_pem.bytes(), clients, files)


@pytest.fixture(scope="module")
async def mtls_doors(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> AsyncIterator[Doors]:
    files = certificates.files
    extra = f"""tls {{ cert = "{files['cert']}", key = "{files['key']}", client_ca = "{files['ca']}" }}
    auth {{ mtls {{ identities = [
      {{ name = ops, subject_cn = ops-client, role = admin }}
      {{ name = reporting, uri = "spiffe://example.org/reader", role = read }}
    ] }} }}"""
    async with three_doors(_directory(tmp_path_factory, "mtls"), extra) as doors:
        yield doors


MTLS_PROTOCOLS = ("grpc", "connect-http1-json", "grpc-web")


@pytest.mark.parametrize("protocol", MTLS_PROTOCOLS)
async def test_client_certificates_map_to_roles(mtls_doors: Doors, certificates: Certificates,
                                                protocol: str) -> None:
    def caller(kind: str, client: str | None) -> Caller:
        return Caller(mtls_doors.address(kind), protocol, tls=certificates.tls(client), timeout=8)

    wrong = {}
    for kind, method in every_method():
        if (code := await outcome(caller(kind, None), method)) != "UNAUTHENTICATED":
            wrong[f"no certificate {method}"] = code
    for method in ADMIN_METHODS:
        if (code := await outcome(caller("oam", "reader"), method)) != "PERMISSION_DENIED":
            wrong[f"reader {method}"] = code
        if (code := await outcome(caller("oam", "ops-client"), method)) in REFUSED:
            wrong[f"ops {method}"] = code
    for kind, method in (("query", "/laredo.v1.LaredoQueryService/CountRows"),
                         ("fanout", "/laredo.replication.v1.LaredoReplicationService/GetReplicationStatus"),
                         ("oam", "/laredo.v1.TableSyncOAM/GetStatus")):
        if (code := await outcome(caller(kind, "reader"), method)) in REFUSED:
            wrong[f"reader {method}"] = code
    assert not wrong, f"{protocol}: {wrong}"


@pytest.mark.parametrize("protocol", MTLS_PROTOCOLS)
async def test_an_unlisted_certificate_is_named_in_the_refusal(mtls_doors: Doors, certificates: Certificates,
                                                               protocol: str) -> None:
    caller = Caller(mtls_doors.oam.address, protocol, tls=certificates.tls("stranger"), timeout=5)
    with pytest.raises(CallError) as caught:
        await caller.unary("/laredo.v1.TableSyncOAM/GetStatus", method_types(
            "/laredo.v1.TableSyncOAM/GetStatus")[0]())
    assert caught.value.code == "UNAUTHENTICATED"
    assert "CN=stranger" in caught.value.message and "auth.mtls.identities" in caught.value.message


async def test_a_forged_certificate_header_is_not_believed(mtls_doors: Doors, certificates: Certificates) -> None:
    forged = {"x-forwarded-client-cert": 'Hash=aa;Subject="CN=ops-client"'}
    caller = Caller(mtls_doors.oam.address, "grpc", tls=certificates.tls(None), headers=forged, timeout=5)
    assert await outcome(caller, "/laredo.v1.TableSyncOAM/PauseSync") == "UNAUTHENTICATED"
    with_reader = Caller(mtls_doors.oam.address, "connect-http1-json", tls=certificates.tls("reader"),
                         headers=forged, timeout=5)
    assert await outcome(with_reader, "/laredo.v1.TableSyncOAM/PauseSync") == "PERMISSION_DENIED"


# -- JWT -----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def signing_keys() -> tuple[object, object]:
    return rsa_key("issuer-1"), rsa_key("issuer-1")  # the second: the same key id, another key


@pytest.fixture(scope="module")
async def jwt_oam(tmp_path_factory: pytest.TempPathFactory, signing_keys) -> AsyncIterator[Running]:  # noqa
    root = tmp_path_factory.mktemp("jwt")
    jwks = write_jwks(root / "jwks.json", signing_keys[0])
    extra = f'auth {{ jwt {{ jwks_file = "{jwks}", issuer = "{ISSUER}", audience = {AUDIENCE} }} }}\n{QUICK_COMMANDS}'
    async with services.oam(root, extra=extra) as running:
        yield running


@pytest.mark.parametrize("protocol", ("grpc", "connect-http1-json", "grpc-web"))
async def test_jwts_are_verified(jwt_oam: Running, signing_keys, protocol: str) -> None:  # noqa: ANN001
    key, impostor = signing_keys
    pause = "/laredo.v1.TableSyncOAM/PauseSync"

    async def call(token: str) -> str:
        return await outcome(Caller(jwt_oam.address, protocol, headers=bearer(token), timeout=8), pause)

    assert await call(key.token({"laredo_role": "admin"}, sub="deployer")) not in REFUSED
    assert await call(key.token({"laredo_role": "read"})) == "PERMISSION_DENIED"
    for bad in (impostor.token({"laredo_role": "admin"}), key.token({"laredo_role": "admin"}, aud="other"),
                key.token({"laredo_role": "admin"}, expires_in=-600)):
        assert await call(bad) == "UNAUTHENTICATED"
    with pytest.raises(CallError) as caught:
        await Caller(jwt_oam.address, protocol, headers=bearer(key.token({"laredo_role": "read"}, sub="dash")),
                     timeout=5).unary(pause, method_types(pause)[0]())
    assert caught.value.message == f"credential 'jwt:dash' (role read) may not call {pause}: it needs role admin"

