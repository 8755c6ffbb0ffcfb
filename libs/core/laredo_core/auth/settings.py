"""The `auth { tokens, jwt, mtls }` section: which credentials exist and the role each one grants.

Settings name where each token's secret is (a file, an environment variable, or its SHA-256 given); the
secret is read when a port starts (resolve_tokens) and kept only as its digest. Every problem is reported
at once with its key; secrets never appear in one.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from laredo_core.auth.identity import Role, parse_table_pattern
from laredo_kernel.errors import ConfigError

if TYPE_CHECKING:  # laredo_core.config imports this module (through the front door's settings)
    from laredo_core.config.reader import Reader

MIN_TOKEN_LENGTH = 16
_HEX_DIGEST = re.compile(r"^[0-9a-fA-F]{64}$")
_SOURCES = ("file", "env", "sha256")
_MATCHERS = ("subject_cn", "uri", "dns")


def token_digest(token: str) -> bytes:
    """What is kept of a bearer token, and what a presented token is compared by."""
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """A static bearer token, by where its secret is: `source` file, env or sha256 and `where` (the path, the
    variable's name, or the hex digest). The secret itself is read only when a port starts (resolve_tokens)."""

    name: str
    role: Role
    source: str
    where: str
    tables: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """A static bearer token ready to compare: `digest` is the SHA-256 of the secret."""

    name: str
    role: Role
    digest: bytes = field(repr=False)
    tables: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class JwtSettings:
    jwks_file: str
    issuer: str
    audience: str
    role_claim: str = "laredo_role"
    tables_claim: str = "laredo_tables"
    name_claim: str = "sub"
    leeway: float = 30.0  # seconds of clock skew allowed on exp, nbf and iat


@dataclass(frozen=True, slots=True)
class CertificateIdentity:
    """A client certificate whose Subject CN, a URI SAN or a DNS SAN equals `value` (`field`) gets `role`."""

    name: str
    field: str  # subject_cn, uri or dns
    value: str
    role: Role
    tables: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class AuthSettings:
    tokens: tuple[TokenSettings, ...] = ()
    jwt: JwtSettings | None = None
    certificates: tuple[CertificateIdentity, ...] = ()


def parse_auth(raw: Mapping[str, Any], problems: list[str], *, client_ca: bool,
               front_door: bool) -> AuthSettings | None:
    """The whole tree's `auth` section; None when there is none (no checks: every call is allowed)."""
    from laredo_core.config.reader import Reader

    if raw.get("auth") is None:
        return None
    if not isinstance(raw["auth"], Mapping):
        problems.append(f"auth: expected a section {{ tokens = [...], jwt {{ ... }}, mtls {{ ... }} }}, "
                        f"got {raw['auth']!r}")
        return None
    r = Reader(raw["auth"], "auth", problems)
    tokens = _tokens(r)
    jwt = _jwt(r.section("jwt")) if r.has("jwt") else None
    mtls = r.section("mtls")
    certificates = tuple(c for c in (_certificate(s) for s in mtls.sections("identities")) if c is not None)
    mtls.check_unknown()
    r.check_unknown()
    if mtls.has("identities") and not client_ca:
        mtls.problem("identities", "client certificates are only seen with mutual TLS: set tls.client_ca "
                                   "(and tls.cert, tls.key)")
    if mtls.has("identities") and not front_door:
        mtls.problem("identities", "client certificates are checked by the front door: set "
                                   "front_door.enabled = true")
    if not tokens and jwt is None and not certificates:
        r.problem("tokens", "auth names no credential: add tokens, jwt or mtls.identities (or remove the auth "
                            "section to run without authentication, on loopback only)")
    _check_unique(r, tokens, certificates)
    return AuthSettings(tuple(tokens), jwt, certificates)


def _tokens(r: Reader) -> list[TokenSettings]:
    tokens = []
    for t in r.sections("tokens"):
        name, role, tables = t.string("name"), _role(t), _tables(t)
        given = [key for key in _SOURCES if t.has(key)]
        values = {key: t.string(key, "") for key in _SOURCES}
        t.check_unknown()
        if len(given) != 1:
            t.problem("file", f"give exactly one of file, env or sha256 for token {name!r}"
                              f"{' (got ' + ', '.join(given) + ')' if given else ''}")
            continue
        source = given[0]
        if source == "sha256" and not _HEX_DIGEST.fullmatch(values[source]):
            t.problem("sha256", "expected the token's SHA-256 as 64 hex digits (e.g. printf %s \"$TOKEN\" | "
                                "sha256sum)")
        elif not values[source]:
            t.problem(source, "must not be empty")
        elif role is not None:
            tokens.append(TokenSettings(name, role, source, values[source], tables))
    return tokens


def resolve_tokens(tokens: tuple[TokenSettings, ...], environ: Mapping[str, str] | None = None
                   ) -> tuple[TokenCredential, ...]:
    """Read every token's secret (file, environment) and keep its digest; ConfigError listing every problem."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    resolved = []
    for i, token in enumerate(tokens):
        try:
            resolved.append(TokenCredential(token.name, token.role, _digest(token, environ), token.tables))
        except ValueError as exc:
            problems.append(f"auth.tokens[{i}] ({token.name}): {exc}")
    digests: dict[bytes, str] = {}
    for credential in resolved:
        if credential.digest in digests:
            problems.append(f"auth.tokens: {digests[credential.digest]!r} and {credential.name!r} have the same "
                            "secret: give each its own")
        digests.setdefault(credential.digest, credential.name)
    if problems:
        raise ConfigError(problems)
    return tuple(resolved)


def _digest(token: TokenSettings, environ: Mapping[str, str]) -> bytes:
    if token.source == "sha256":
        return bytes.fromhex(token.where)
    if token.source == "file":
        try:
            value = Path(token.where).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ValueError(f"no file at {token.where!r}: it should hold the token") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {token.where!r}: {type(exc).__name__}") from None
        origin = f"file {token.where}"
    else:
        value = environ.get(token.where, "").strip()
        if not value:
            raise ValueError(f"environment variable {token.where} is not set or empty: it should hold the token")
        origin = f"environment variable {token.where}"
    if len(value) < MIN_TOKEN_LENGTH:
        raise ValueError(f"the token in {origin} has {len(value)} characters; use at least "
                         f"{MIN_TOKEN_LENGTH} random ones (e.g. openssl rand -hex 32)")
    return token_digest(value)


def _jwt(j: Reader) -> JwtSettings | None:
    from laredo_core.auth.jwt_verifier import load_jwks  # PyJWT, only when JWT is configured

    settings = JwtSettings(
        jwks_file=j.string("jwks_file"), issuer=j.string("issuer"), audience=j.string("audience"),
        role_claim=j.string("role_claim", "laredo_role"), tables_claim=j.string("tables_claim", "laredo_tables"),
        name_claim=j.string("name_claim", "sub"), leeway=j.duration("leeway", 30.0))
    j.check_unknown()
    if settings.jwks_file:
        try:
            load_jwks(settings.jwks_file)
        except ValueError as exc:
            j.problem("jwks_file", str(exc))
            return None
    return settings if settings.jwks_file and settings.issuer and settings.audience else None


def _certificate(c: Reader) -> CertificateIdentity | None:
    given = [key for key in _MATCHERS if c.has(key)]
    role, tables = _role(c), _tables(c)
    values = {key: c.string(key, "") for key in _MATCHERS}
    name = c.string("name", "")
    c.check_unknown()
    if len(given) != 1:
        c.problem("subject_cn", "give exactly one of subject_cn, uri or dns: what in the client certificate "
                                "names this identity")
        return None
    field_name = given[0]
    if not values[field_name]:
        c.problem(field_name, "must not be empty")
        return None
    if role is None:
        return None
    return CertificateIdentity(name or f"{field_name}:{values[field_name]}", field_name, values[field_name],
                               role, tables)


def _role(r: Reader) -> Role | None:
    text = r.string("role")
    if not text:
        return None
    try:
        return Role.parse(text)
    except ValueError as exc:
        r.problem("role", str(exc))
        return None


def _tables(r: Reader) -> frozenset[str] | None:
    if not r.has("tables"):
        return None
    patterns = set()
    for text in r.string_list("tables"):
        try:
            patterns.add(parse_table_pattern(text))
        except ValueError as exc:
            r.problem("tables", str(exc))
    if not patterns:
        r.problem("tables", "an empty list allows no table at all: list tables, or leave `tables` out for all")
    return frozenset(patterns)


def _check_unique(r: Reader, tokens: list[TokenSettings], certificates: tuple[CertificateIdentity, ...]) -> None:
    names = [t.name for t in tokens]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        r.problem("tokens", f"two tokens are named {duplicate!r}: names must be unique (they appear in logs)")
    matchers = [(c.field, c.value) for c in certificates]
    for field_name, value in sorted({m for m in matchers if matchers.count(m) > 1}):
        r.problem("mtls", f"{field_name} = {value!r} is listed twice in mtls.identities")
