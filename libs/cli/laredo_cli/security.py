"""Connection security from the command line and the environment: TLS settings, the bearer token, and the
messages of calls that failed for want of either. The token is never printed: messages name where it came from.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import grpc

from laredo_cli.errors import CliError, ExitCode, status_of
from laredo_client.credentials import BearerToken, TlsOptions, parse_address, says_cleartext
from laredo_kernel.errors import ConfigError

TOKEN_ENV, TOKEN_FILE_ENV = "LAREDO_TOKEN", "LAREDO_TOKEN_FILE"
TLS_ENV, CA_ENV, CERT_ENV, KEY_ENV, SERVER_NAME_ENV = (
    "LAREDO_TLS", "LAREDO_CA", "LAREDO_CERT", "LAREDO_KEY", "LAREDO_TLS_SERVER_NAME")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def add_security_options(group: argparse._ArgumentGroup, default: Callable[[object], object]) -> None:
    """--token, --token-file, --tls, --ca, --cert, --key, --tls-server-name; the environment is read later
    (security_from), so an option always wins over a variable, whichever way the token is given. Their
    destinations are prefixed so no command's own arguments (`get TABLE KEY...`) collide with them."""
    group.add_argument("--token", dest="bearer_token", default=default(None), metavar="TOKEN",
                       help=f"bearer token for both services (env {TOKEN_ENV}); prefer --token-file or the "
                            "environment: a command line is visible to other users")
    group.add_argument("--token-file", dest="bearer_token_file", default=default(None), metavar="FILE",
                       help=f"read the bearer token from FILE (env {TOKEN_FILE_ENV})")
    group.add_argument("--tls", action="store_true", default=default(False),
                       help=f"connect with TLS, trusting the system's CAs (env {TLS_ENV}=1); implied by --ca, "
                            "--cert and https:// addresses")
    group.add_argument("--ca", dest="ca_file", default=default(None), metavar="FILE",
                       help=f"PEM file of the CA that signs the servers' certificates (env {CA_ENV})")
    group.add_argument("--cert", dest="client_cert", default=default(None), metavar="FILE",
                       help=f"client certificate (PEM) for mutual TLS, with --key (env {CERT_ENV})")
    group.add_argument("--key", dest="client_key", default=default(None), metavar="FILE",
                       help=f"private key (PEM) of --cert (env {KEY_ENV})")
    group.add_argument("--tls-server-name", default=default(None), metavar="NAME",
                       help=f"name the servers' certificates must hold, when it differs from the address's "
                            f"host (env {SERVER_NAME_ENV})")


@dataclass(frozen=True)
class Security:
    """TLS for addresses without a scheme (None: cleartext) and the token every call carries (None: no token)."""

    tls: TlsOptions | None = None
    token: BearerToken | None = None

    def tls_for(self, address: str) -> TlsOptions | None:
        """`https://` means TLS (the system's roots unless --ca says otherwise); a cleartext scheme contradicts
        TLS options; a bare host:port follows them."""
        if parse_address(address).https:
            return self.tls or TlsOptions()
        if says_cleartext(address) and self.tls is not None:
            raise CliError(f"{address} names a cleartext scheme but TLS is configured (--tls, --ca, --cert or "
                           f"their variables): write https://{parse_address(address).host_port} or drop the "
                           f"scheme", ExitCode.USAGE)
        return self.tls


def security_from(args: argparse.Namespace, env: Mapping[str, str]) -> Security:
    """TLS options and the token, each option before its environment variable; unreadable files, a half
    client certificate or two token sources are usage errors."""
    try:
        return Security(_tls(args, env), _token(args, env))
    except ConfigError as error:
        raise CliError("; ".join(map(_in_cli_terms, error.problems)), ExitCode.USAGE) from None


def _in_cli_terms(problem: str) -> str:
    """The client library names settings as its arguments (`tls.ca: ...`); say the option and variable."""
    for setting, option, variable in (("ca", "--ca", CA_ENV), ("cert", "--cert", CERT_ENV),
                                      ("key", "--key", KEY_ENV)):
        if problem.startswith(f"tls.{setting}: "):
            return f"{option} (or {variable}): {problem.removeprefix(f'tls.{setting}: ')}"
    return problem


def _tls(args: argparse.Namespace, env: Mapping[str, str]) -> TlsOptions | None:
    ca, cert, key = (args.ca_file or env.get(CA_ENV), args.client_cert or env.get(CERT_ENV),
                     args.client_key or env.get(KEY_ENV))
    server_name = args.tls_server_name or env.get(SERVER_NAME_ENV) or ""
    if not (args.tls or _flag(env, TLS_ENV) or ca or cert or key):
        return None
    if bool(cert) != bool(key):
        raise ConfigError(["a client certificate needs its key: give --cert and --key (or LAREDO_CERT and "
                           "LAREDO_KEY) together"])
    return TlsOptions.from_files(ca=ca, cert=cert, key=key, server_name=server_name)


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError([f"{name}={env[name]!r}: expected 1/true/yes/on or 0/false/no/off"])


def _token(args: argparse.Namespace, env: Mapping[str, str]) -> BearerToken | None:
    if args.bearer_token is not None and args.bearer_token_file is not None:
        raise ConfigError(["give the token once: --token or --token-file, not both"])
    if args.bearer_token is not None:
        return BearerToken(args.bearer_token, source="given with --token")
    if args.bearer_token_file is not None:
        return BearerToken.from_file(args.bearer_token_file)
    if env.get(TOKEN_ENV) and env.get(TOKEN_FILE_ENV):
        raise ConfigError([f"both {TOKEN_ENV} and {TOKEN_FILE_ENV} are set: unset one (or pass --token or "
                           f"--token-file, which win)"])
    if env.get(TOKEN_ENV):
        return BearerToken.from_env(TOKEN_ENV, env)
    if env.get(TOKEN_FILE_ENV):
        return BearerToken.from_file(env[TOKEN_FILE_ENV])
    return None


# -- failures for want of a token, a role or TLS ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Link:
    """How a failed call went: to whom, with TLS (and a client certificate) or not, with a token from where."""

    service: str
    address: str
    tls: TlsOptions | None
    token: BearerToken | None


def security_failure(error: grpc.RpcError, link: Link) -> CliError | None:
    """A CliError when the call failed on the token, the role or TLS; None for every other failure."""
    code, details = status_of(error)
    where = f"the {link.service} at {link.address}"
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return CliError(_unauthenticated(where, details, link.token), ExitCode.UNAUTHENTICATED)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return CliError(f"{where} refused: the token's role is insufficient for this command ({details}); "
                        f"administrative commands need a token with the admin role, reads one with the read role for "
                        f"the table",
                        ExitCode.PERMISSION_DENIED)
    problem = _tls_problem(details, link) if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN) \
        else None
    return CliError(f"{where}: {problem}", ExitCode.TLS) if problem else None


def _unauthenticated(where: str, details: str, token: BearerToken | None) -> str:
    if token is None:
        return (f"{where} requires a token: pass --token or set {TOKEN_ENV} (or --token-file / "
                f"{TOKEN_FILE_ENV}) ({details})")
    return (f"{where} did not accept the token {token.source} ({details}); check it, or pass another with "
            f"--token or {TOKEN_ENV}")


def _tls_problem(details: str, link: Link) -> str | None:
    """What went wrong with TLS, read from grpc's (or the front door's) message; None when it is not TLS."""
    tls, lowered = link.tls, details.lower()
    if tls is None:
        if "serves tls only" in lowered:
            return (f"the port serves TLS and the CLI connected without it: pass --tls (and --ca FILE for a "
                    f"private CA), or write https://{parse_address(link.address).host_port}")
        return None
    if "certificate_verify_failed" in lowered:
        return (f"its TLS certificate is not signed by a CA the CLI trusts ({_last_error(details)}): pass "
                f"--ca FILE (or set {CA_ENV}) with the CA that signed it")
    if "hostname verification" in lowered or "peer name" in lowered:
        name = tls.server_name or parse_address(link.address).host_port.rsplit(":", 1)[0]
        return (f"its TLS certificate does not hold the name {name!r}: connect by a name it holds, or pass "
                f"--tls-server-name NAME")
    if "wrong_version_number" in lowered:
        return "the port does not serve TLS (the TLS handshake got a cleartext answer): drop --tls/--ca/https://"
    if any(sign in lowered for sign in ("unwrap failed", "tsi_data_corrupted", "certificate_required",
                                        "socket closed", "handshake")):
        return _handshake_refused(tls, details)
    return None


def _handshake_refused(tls: TlsOptions, details: str) -> str:
    if not tls.mutual:
        return (f"the server closed the TLS connection ({_last_error(details)}); it probably requires a client "
                f"certificate: pass --cert FILE --key FILE (or set {CERT_ENV} and {KEY_ENV})")
    return (f"the server closed the TLS connection ({_last_error(details)}); it probably does not accept the "
            f"client certificate (is it signed by the CA the server trusts?)")


def _last_error(details: str) -> str:
    """grpc's `failed to connect to all addresses; last error: UNKNOWN: ipv4:...: <reason>` -> `<reason>`."""
    reason = details.rsplit("last error: ", 1)[-1].removesuffix(": OK")  # grpc appends the status of the socket
    parts = reason.split(": ", 2)
    return parts[2] if len(parts) == 3 and parts[1].startswith(("ipv4:", "ipv6:", "unix:")) else reason
