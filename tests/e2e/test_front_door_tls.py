"""Every service port serves TLS when configured (certificates made at test time), on every protocol; mutual TLS
refuses clients without a certificate; cleartext against a TLS port gets an answer that says to use TLS.

Real front door (Envoy) in front of the OAM service; its internals use in-memory stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
from laredo.v1 import oam_pb2
from laredo_core.config import load_settings
from laredo_core.frontdoor.envoy_config import TLS_REFUSAL
from laredo_oam.main import App
from laredo_testing.eventually import eventually
from laredo_testing.protocols import PROTOCOLS, Caller, CallError, TlsClient

from tests.frontdoor.services import oam

GET_STATUS = "/laredo.v1.TableSyncOAM/GetStatus"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def certs(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("certs")
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("ops-client", common_name="ops-client")
    files = {"ca": where / "ca.pem", "cert": where / "server.pem", "key": where / "server.key",
             "client_cert": where / "client.pem", "client_key": where / "client.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["cert"]))
    server.private_key_pem.write_to_path(str(files["key"]))
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    return files


def _tls(**files: Path | bool) -> str:
    return "tls { " + ", ".join(f'{k} = "{v}"' if isinstance(v, Path) else f"{k} = {str(v).lower()}"
                                 for k, v in files.items()) + " }"


@pytest.fixture
async def tls_app(certs: dict[str, Path], tmp_path: Path) -> AsyncIterator[App]:
    async with oam(tmp_path, extra=_tls(cert=certs["cert"], key=certs["key"])) as running:
        yield running.app


@pytest.fixture
async def mtls_app(certs: dict[str, Path], tmp_path: Path) -> AsyncIterator[App]:
    async with oam(tmp_path, extra=_tls(cert=certs["cert"], key=certs["key"], client_ca=certs["ca"],
                                        require_client_cert=True)) as running:
        yield running.app


def _client(certs: dict[str, Path], *, with_cert: bool = False) -> TlsClient:
    return TlsClient(ca=certs["ca"].read_bytes(),
                     cert=certs["client_cert"].read_bytes() if with_cert else None,
                     key=certs["client_key"].read_bytes() if with_cert else None)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_protocol_works_over_tls(tls_app: App, certs: dict[str, Path], protocol: str) -> None:
    caller = Caller(f"localhost:{tls_app.grpc_port}", protocol, tls=_client(certs))
    assert isinstance(await caller.unary(GET_STATUS, oam_pb2.GetStatusRequest()), oam_pb2.GetStatusResponse)


async def _curl(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec("curl", "-sS", *args, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_cleartext_against_a_tls_port_is_told_to_use_tls(tls_app: App) -> None:
    code, body, _ = await _curl("-H", "content-type: application/json", "-d", "{}", "-w", "\n%{http_code}",
                                f"http://127.0.0.1:{tls_app.grpc_port}/laredo.v1.TableSyncOAM/GetStatus")
    assert code == 0 and body.endswith("426") and TLS_REFUSAL in body
    with pytest.raises(CallError) as refused:
        await Caller(f"127.0.0.1:{tls_app.grpc_port}", "grpc").unary(GET_STATUS, oam_pb2.GetStatusRequest())
    assert "TLS only" in refused.value.message, refused.value


async def test_a_client_that_does_not_trust_the_certificate_is_refused(tls_app: App) -> None:
    other = trustme.CA()
    with pytest.raises(CallError) as refused:
        await Caller(f"localhost:{tls_app.grpc_port}", "grpc", tls=TlsClient(ca=other.cert_pem.bytes())).unary(
            GET_STATUS, oam_pb2.GetStatusRequest())
    assert refused.value.code == "UNAVAILABLE"


@pytest.mark.parametrize("protocol", ["grpc", "connect-http1-json", "grpc-web"])
async def test_mutual_tls_needs_a_client_certificate(mtls_app: App, certs: dict[str, Path], protocol: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    address = f"localhost:{mtls_app.grpc_port}"
    answer = await Caller(address, protocol, tls=_client(certs, with_cert=True)).unary(
        GET_STATUS, oam_pb2.GetStatusRequest())
    assert isinstance(answer, oam_pb2.GetStatusResponse)
    with pytest.raises(CallError):
        await Caller(address, protocol, tls=_client(certs)).unary(GET_STATUS, oam_pb2.GetStatusRequest())
    # the operator reads who was turned away and why
    await eventually(lambda: any("TLS handshake with 127.0.0.1:" in r.getMessage() and "failed" in r.getMessage()
                                 for r in caplog.records), timeout=10, what="the failed handshake in the log")


def test_tls_settings_name_what_is_wrong(tmp_path: Path) -> None:
    from laredo_kernel.errors import ConfigError

    def problems(*sets: str) -> str:
        with pytest.raises(ConfigError) as error:
            load_settings(None, env={}, sets=list(sets))
        return str(error.value)

    assert "cert and key go together" in problems(f"tls.cert={tmp_path}")
    assert "no file at" in problems(f"tls.cert={tmp_path / 'missing.pem'}", f"tls.key={tmp_path / 'k.pem'}")
    assert "set client_ca" in problems("tls.require_client_cert=true")
