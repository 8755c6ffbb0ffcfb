"""TLS and token options: option before environment, files read, contradictions refused, the token never shown,
and the messages of calls refused for want of a token, a role or TLS."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from laredo_cli.errors import CliError, ExitCode
from laredo_cli.main import build_parser
from laredo_cli.security import Link, Security, security_failure, security_from
from laredo_client import BearerToken, TlsOptions
from libs.cli.tests.cli_runner import _run_capturing
from libs.cli.tests.unit.test_cli_exit_codes import FakeRpcError
from libs.client.tests.tls_files import TlsFiles, write_tls_files

SECRET = "cli-s3cret-token"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


def security(*argv: str, env: dict[str, str] | None = None) -> Security:
    """The security of `laredo *argv` (a command included)."""
    env = env or {}
    return security_from(build_parser(env).parse_args(list(argv)), env)


def token_of(result: Security) -> str | None:
    return result.token.value() if result.token is not None else None


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("from-file\n")
    return path


def test_by_default_cleartext_and_no_token() -> None:
    assert security("status") == Security(None, None)


def test_the_token_from_an_option_the_environment_or_a_file(token_file: Path) -> None:
    assert token_of(security("--token", SECRET, "status")) == SECRET
    assert token_of(security("status", "--token", SECRET)) == SECRET, "after the command too"
    assert token_of(security("status", "--token-file", str(token_file))) == "from-file"
    assert token_of(security("status", env={"LAREDO_TOKEN": SECRET})) == SECRET
    assert token_of(security("status", env={"LAREDO_TOKEN_FILE": str(token_file)})) == "from-file"


def test_an_option_wins_over_either_variable(token_file: Path) -> None:
    assert token_of(security("--token", SECRET, "status", env={"LAREDO_TOKEN_FILE": str(token_file)})) == SECRET
    assert token_of(security("status", "--token-file", str(token_file), env={"LAREDO_TOKEN": SECRET})) == "from-file"
    assert token_of(security("--token", "opt", "status", env={"LAREDO_TOKEN": SECRET})) == "opt"


def test_two_token_sources_at_one_level_are_refused(token_file: Path) -> None:
    with pytest.raises(CliError, match="--token or --token-file, not both") as raised:
        security("status", "--token", SECRET, "--token-file", str(token_file))
    assert raised.value.exit_code is ExitCode.USAGE
    with pytest.raises(CliError, match="both LAREDO_TOKEN and LAREDO_TOKEN_FILE are set"):
        security("status", env={"LAREDO_TOKEN": SECRET, "LAREDO_TOKEN_FILE": str(token_file)})


def test_tls_from_options_and_the_environment(tls_files: TlsFiles, tmp_path: Path) -> None:
    assert security("--tls", "status").tls == TlsOptions()
    assert security("status", env={"LAREDO_TLS": "true"}).tls == TlsOptions()
    assert security("status", env={"LAREDO_TLS": "0"}).tls is None
    assert security("status", "--ca", str(tls_files.ca)).tls == TlsOptions(ca=tls_files.ca.read_bytes()), \
        "--ca means TLS"
    mutual = security("status", env={"LAREDO_CA": str(tls_files.ca), "LAREDO_CERT": str(tls_files.client_cert),
                                     "LAREDO_KEY": str(tls_files.client_key),
                                     "LAREDO_TLS_SERVER_NAME": "oam.internal"}).tls
    assert mutual is not None and mutual.mutual and mutual.server_name == "oam.internal"
    other = tmp_path / "other-ca.pem"
    other.write_bytes(tls_files.server_cert.read_bytes())
    chosen = security("status", "--ca", str(other), env={"LAREDO_CA": str(tls_files.ca)}).tls
    assert chosen is not None and chosen.ca == other.read_bytes(), "the option wins over LAREDO_CA"


@pytest.mark.parametrize(("argv", "env", "problem"), [
    (("status", "--cert", "c.pem"), {}, "needs its key: give --cert and --key"),
    (("status",), {"LAREDO_KEY": "k.pem"}, "needs its key"),
    (("status",), {"LAREDO_TLS": "maybe"}, "LAREDO_TLS='maybe': expected 1/true/yes/on"),
    (("status", "--ca", "/nonexistent/ca.pem"), {}, "--ca (or LAREDO_CA): cannot read '/nonexistent/ca.pem'"),
    (("status", "--token-file", "/nonexistent/token"), {}, "cannot read the token file '/nonexistent/token'"),
    (("status", "--token", ""), {}, "token given with --token: is empty"),
])
def test_bad_security_settings_are_usage_errors(argv: tuple[str, ...], env: dict[str, str], problem: str) -> None:
    with pytest.raises(CliError) as raised:
        security(*argv, env=env)
    assert raised.value.exit_code is ExitCode.USAGE and problem in raised.value.message, raised.value.message


def test_a_bad_setting_ends_the_command_with_2_before_any_call() -> None:
    result = _run_capturing(["status", "--ca", "/nonexistent/ca.pem", "--server", "127.0.0.1:1"], {}, False)
    assert result.code == 2 and result.out == "", result
    assert result.err.startswith("laredo: --ca (or LAREDO_CA): cannot read '/nonexistent/ca.pem'"), result


def test_a_rejected_token_is_never_repeated() -> None:
    result = _run_capturing(["status", "--token", f"Bearer {SECRET}"], {}, False)
    assert result.code == 2 and "without the 'Bearer ' prefix" in result.err, result
    assert SECRET not in result.err + result.out


def test_https_addresses_mean_tls_and_cleartext_schemes_contradict_it(tls_files: TlsFiles) -> None:
    assert Security().tls_for("https://oam:4001") == TlsOptions()
    assert Security().tls_for("oam:4001") is None
    with_ca = Security(TlsOptions.from_files(ca=tls_files.ca))
    assert with_ca.tls_for("https://oam:4001") is with_ca.tls and with_ca.tls_for("oam:4001") is with_ca.tls
    with pytest.raises(CliError, match="names a cleartext scheme but TLS is configured"):
        with_ca.tls_for("http://oam:4001")


# -- messages of refused calls ----------------------------------------------------------------------------------

def failure(code: grpc.StatusCode, details: str, *, tls: TlsOptions | None = None,
            token: BearerToken | None = None) -> CliError | None:
    return security_failure(FakeRpcError(code, details), Link("OAM service", "oam:4001", tls, token))


def test_unauthenticated_without_a_token_says_how_to_give_one() -> None:
    error = failure(grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required")
    assert error is not None and error.exit_code is ExitCode.UNAUTHENTICATED == 9
    assert "the OAM service at oam:4001 requires a token: pass --token or set LAREDO_TOKEN" in error.message


def test_unauthenticated_with_a_token_names_its_source_not_the_token() -> None:
    error = failure(grpc.StatusCode.UNAUTHENTICATED, "unknown token", token=BearerToken.from_env(
        "LAREDO_TOKEN", {"LAREDO_TOKEN": SECRET}))
    assert error is not None and error.exit_code is ExitCode.UNAUTHENTICATED
    assert "did not accept the token from the environment variable LAREDO_TOKEN" in error.message
    assert SECRET not in error.message


def test_permission_denied_says_the_role_is_insufficient() -> None:
    error = failure(grpc.StatusCode.PERMISSION_DENIED, "ResetSource needs the admin role",
                    token=BearerToken.of(SECRET))
    assert error is not None and error.exit_code is ExitCode.PERMISSION_DENIED == 10
    assert "the token's role is insufficient" in error.message and SECRET not in error.message


CA = TlsOptions(ca=b"-----BEGIN CERTIFICATE-----")
MUTUAL = TlsOptions(ca=CA.ca, cert=b"-----BEGIN CERTIFICATE-----", key=b"-----BEGIN PRIVATE KEY-----")
LAST = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:4001: "


@pytest.mark.parametrize(("code", "details", "tls", "expected"), [
    (grpc.StatusCode.UNKNOWN, "this port serves TLS only: connect with https:// (Connect, gRPC-Web) or with TLS",
     None, "serves TLS and the CLI connected without it: pass --tls"),
    (grpc.StatusCode.UNAVAILABLE, LAST + "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1000007d"
     ":SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate",
     TlsOptions(), "not signed by a CA the CLI trusts (Tls handshake failed"),
    (grpc.StatusCode.UNAVAILABLE, LAST + "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:100000f7"
     ":SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER", CA, "the port does not serve TLS"),
    (grpc.StatusCode.UNAVAILABLE, LAST + "Custom verification check failed with error: UNAUTHENTICATED: Hostname "
     "Verification Check failed.", CA, "does not hold the name 'oam': connect by a name it holds"),
    (grpc.StatusCode.UNAVAILABLE, LAST.replace("UNKNOWN", "UNAVAILABLE") + "Unwrap failed (TSI_DATA_CORRUPTED)",
     CA, "probably requires a client certificate: pass --cert FILE --key FILE"),
    (grpc.StatusCode.UNAVAILABLE, LAST + "Unwrap failed (TSI_DATA_CORRUPTED)", MUTUAL,
     "probably does not accept the client certificate"),
])
def test_tls_failures_say_what_to_change(code: grpc.StatusCode, details: str, tls: TlsOptions | None,
                                         expected: str) -> None:
    error = failure(code, details, tls=tls)
    assert error is not None and error.exit_code is ExitCode.TLS == 11, error
    assert error.message.startswith("the OAM service at oam:4001: ") and expected in error.message, error.message


@pytest.mark.parametrize(("code", "details", "tls"), [
    (grpc.StatusCode.UNAVAILABLE, LAST + "Failed to connect to remote host: Connection refused", None),
    (grpc.StatusCode.UNAVAILABLE, LAST + "Failed to connect to remote host: Connection refused", CA),
    (grpc.StatusCode.UNAVAILABLE, "table public.items is still loading", CA),
    (grpc.StatusCode.NOT_FOUND, "no table public.nope", CA),
])
def test_other_failures_are_left_to_the_usual_messages(code: grpc.StatusCode, details: str,
                                                       tls: TlsOptions | None) -> None:
    assert failure(code, details, tls=tls) is None


def test_command_arguments_do_not_collide_with_the_security_options(tls_files: TlsFiles) -> None:
    args = build_parser({}).parse_args(["get", "items", "7", "--key", str(tls_files.client_key), "--cert",
                                        str(tls_files.client_cert)])
    assert args.key == ["7"], "get's KEY is its own"
    assert security_from(args, {}).tls is not None
