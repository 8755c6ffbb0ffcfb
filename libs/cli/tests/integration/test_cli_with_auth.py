"""`laredo` against the real OAM service with authentication configured (static bearer tokens and mutual-TLS
identities mapped to roles), through its real front door over TLS: no token, a wrong token, a read token on an
administrative command, and tokens given every way the CLI takes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from laredo_oam.main import App

from libs.cli.tests.cli_runner import Result, run_in_process, run_subprocess
from libs.cli.tests.integration.test_cli_over_tls import running_oam
from libs.client.tests.tls_files import CLIENT_NAME, TlsFiles, write_tls_files

pytestmark = pytest.mark.integration

ADMIN_TOKEN = "admin-token-" + "a1" * 16
READ_TOKEN = "read-token-" + "b2" * 16


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> tuple[TlsFiles, Path, Path]:
    where = tmp_path_factory.mktemp("auth")
    admin, read = where / "admin.token", where / "read.token"
    admin.write_text(ADMIN_TOKEN + "\n")
    read.write_text(READ_TOKEN + "\n")
    return write_tls_files(where / "tls"), admin, read


@pytest.fixture(scope="module")
async def oam(secrets: tuple[TlsFiles, Path, Path]) -> AsyncIterator[App]:
    tls, admin, read = secrets
    config = admin.parent / "oam.conf"
    config.write_text(f"""
tls {{ cert = "{tls.server_cert}", key = "{tls.server_key}", client_ca = "{tls.ca}" }}
auth {{
  tokens = [ {{ name = ops, role = admin, file = "{admin}" }}, {{ name = dashboard, role = read, file = "{read}" }} ]
  mtls {{ identities = [ {{ name = robot, subject_cn = "{CLIENT_NAME}", role = read }} ] }}
}}
""")
    async with running_oam(config=config) as app:
        yield app


@pytest.fixture
def tls(secrets: tuple[TlsFiles, Path, Path]) -> TlsFiles:
    return secrets[0]


async def laredo(oam: App, tls: TlsFiles, *argv: str, env: dict[str, str] | None = None) -> Result:
    return await run_in_process("--server", f"https://localhost:{oam.grpc_port}", "--ca", str(tls.ca), *argv,
                                env=env)


def secret_free(result: Result) -> Result:
    for token in (ADMIN_TOKEN, READ_TOKEN):
        assert token not in result.out + result.err, f"a token was printed:\n{result}"
    return result


async def test_without_a_token_the_cli_says_to_pass_one(oam: App, tls: TlsFiles) -> None:
    result = await laredo(oam, tls, "status", "--json")
    assert (result.code, result.out) == (9, ""), result
    assert "requires a token: pass --token or set LAREDO_TOKEN" in result.err, result


async def test_a_wrong_token_is_named_by_its_source(oam: App, tls: TlsFiles) -> None:
    result = secret_free(await laredo(oam, tls, "status", env={"LAREDO_TOKEN": READ_TOKEN[::-1]}))
    assert result.code == 9, result
    assert "did not accept the token from the environment variable LAREDO_TOKEN" in result.err, result
    assert READ_TOKEN[::-1] not in result.err


async def test_a_read_token_reads_and_is_refused_administration(oam: App, tls: TlsFiles,
                                                               secrets: tuple[TlsFiles, Path, Path]) -> None:
    read_file = secrets[2]
    status = secret_free(await laredo(oam, tls, "status", "--json", "--token-file", str(read_file)))
    assert status.code == 0 and status.json()["state"] == "SERVICE_STATE_STARTING", status
    refused = secret_free(await laredo(oam, tls, "pause", "--token-file", str(read_file)))
    assert refused.code == 10 and "the token's role is insufficient" in refused.err, refused


async def test_an_admin_token_administers(oam: App, tls: TlsFiles) -> None:
    result = secret_free(await laredo(oam, tls, "pause", "--json", env={"LAREDO_TOKEN": ADMIN_TOKEN}))
    assert result.code == 4 and "no source is configured" in result.err, "past the checks, the service answered"


async def test_a_token_file_from_the_environment_in_a_real_process(oam: App, tls: TlsFiles,
                                                                  secrets: tuple[TlsFiles, Path, Path]) -> None:
    result = secret_free(await run_subprocess("tables", "--json", env={
        "LAREDO_SERVER": f"https://localhost:{oam.grpc_port}", "LAREDO_CA": str(tls.ca),
        "LAREDO_TOKEN_FILE": str(secrets[1])}))
    assert result.code == 0, result


async def test_a_client_certificate_identity_reads_without_a_token(oam: App, tls: TlsFiles) -> None:
    certificate = ("--cert", str(tls.client_cert), "--key", str(tls.client_key))
    status = await laredo(oam, tls, "status", *certificate)
    assert status.code == 0, status
    refused = await laredo(oam, tls, "pause", *certificate)
    assert refused.code == 10, refused
