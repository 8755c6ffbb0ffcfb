"""The `auth` section: every way to name a credential, every mistake reported at once, secrets kept hashed."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from laredo_core.auth.exposure import is_loopback, warn_if_exposed
from laredo_core.auth.identity import Role
from laredo_core.auth.settings import TokenSettings, resolve_tokens, token_digest
from laredo_core.config import load_settings
from laredo_kernel.errors import ConfigError
from libs.core.tests.auth_keys import AUDIENCE, ISSUER, rsa_key, write_jwks

SECRET = "s3cr3t-0123456789abcdef"


def load(tmp_path: Path, text: str):  # noqa: ANN201 - LaredoSettings
    path = tmp_path / "laredo.conf"
    path.write_text(text)
    return load_settings(path, env={})


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    return caught.value.problems


def tls_files(tmp_path: Path) -> str:
    for name in ("cert.pem", "key.pem", "ca.pem"):
        (tmp_path / name).write_text("placeholder")
    return f'tls {{ cert = "{tmp_path}/cert.pem", key = "{tmp_path}/key.pem", client_ca = "{tmp_path}/ca.pem" }}'


def test_without_an_auth_section_there_is_no_authentication_and_ports_stay_on_loopback(tmp_path: Path) -> None:
    settings = load(tmp_path, "")
    assert settings.front_door.auth is None
    for service in (settings.fanout, settings.query, settings.oam):
        assert (service.grpc_host, service.health_host) == ("127.0.0.1", "127.0.0.1")
    assert settings.ingest.health_host == "127.0.0.1"


def test_every_credential_kind_is_read(tmp_path: Path) -> None:
    jwks = write_jwks(tmp_path / "jwks.json", rsa_key())
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    settings = load(tmp_path, f"""
{tls_files(tmp_path)}
auth {{
  tokens = [
    {{ name = ops, role = admin, file = "{tmp_path}/ops" }}
    {{ name = app, role = read, env = APP_TOKEN, tables = ["public.orders", items, "audit.*"] }}
    {{ name = ci, role = READ, sha256 = "{digest}" }}
  ]
  jwt {{ jwks_file = "{jwks}", issuer = "{ISSUER}", audience = {AUDIENCE}, leeway = 5s }}
  mtls {{ identities = [
    {{ subject_cn = ops-client, role = admin }}
    {{ name = app-workload, uri = "spiffe://example.org/app", role = read, tables = [public.orders] }}
    {{ dns = reporting.internal, role = read }}
  ] }}
}}""")
    auth = settings.front_door.auth
    assert auth is not None
    assert [(t.name, t.role, t.source, t.tables) for t in auth.tokens] == [
        ("ops", Role.ADMIN, "file", None),
        ("app", Role.READ, "env", frozenset({"public.orders", "public.items", "audit.*"})),
        ("ci", Role.READ, "sha256", None)]
    assert auth.jwt is not None and (auth.jwt.issuer, auth.jwt.audience, auth.jwt.leeway) == (ISSUER, AUDIENCE, 5.0)
    assert (auth.jwt.role_claim, auth.jwt.tables_claim, auth.jwt.name_claim) == ("laredo_role", "laredo_tables",
                                                                                 "sub")
    assert [(c.name, c.field, c.value, c.role) for c in auth.certificates] == [
        ("subject_cn:ops-client", "subject_cn", "ops-client", Role.ADMIN),
        ("app-workload", "uri", "spiffe://example.org/app", Role.READ),
        ("dns:reporting.internal", "dns", "reporting.internal", Role.READ)]


def test_every_mistake_is_reported_at_once_with_its_key(tmp_path: Path) -> None:
    found = problems(tmp_path, """
auth {
  tokens = [
    { role = admin, env = A_TOKEN }
    { name = b, role = superuser, env = B_TOKEN }
    { name = c, role = read }
    { name = d, role = read, env = D, file = /d }
    { name = e, role = read, sha256 = "abc" }
    { name = f, role = read, env = F, tables = [] }
    { name = f, role = read, env = G, colour = blue }
  ]
  jwt { jwks_file = /no/such/jwks.json }
  mtls { identities = [ { subject_cn = x, uri = "spiffe://y", role = read }, { dns = z } ] }
  extra = 1
}""")
    expected = [
        "auth.tokens[0].name: is required",
        "auth.tokens[1].role: unknown role 'superuser': expected read or admin",
        "auth.tokens[2].file: give exactly one of file, env or sha256 for token 'c'",
        "auth.tokens[3].file: give exactly one of file, env or sha256 for token 'd' (got file, env)",
        "auth.tokens[4].sha256: expected the token's SHA-256 as 64 hex digits",
        "auth.tokens[5].tables: an empty list allows no table at all",
        "auth.tokens[6].colour: unknown key",
        "auth.jwt.issuer: is required",
        "auth.jwt.audience: is required",
        "auth.jwt.jwks_file: no file at '/no/such/jwks.json'",
        "auth.mtls.identities[0].subject_cn: give exactly one of subject_cn, uri or dns",
        "auth.mtls.identities[1].role: is required",
        "auth.extra: unknown key",
        "auth.mtls.identities: client certificates are only seen with mutual TLS: set tls.client_ca",
        "auth.tokens: two tokens are named 'f'",
    ]
    for text in expected:
        assert any(p.startswith(text) for p in found), f"{text!r} not among:\n" + "\n".join(found)


def test_an_empty_auth_section_is_refused(tmp_path: Path) -> None:
    assert any("auth names no credential" in p for p in problems(tmp_path, "auth { }"))


def test_certificates_need_the_front_door(tmp_path: Path) -> None:
    found = problems(tmp_path, f"""{tls_files(tmp_path)}
front_door {{ enabled = false }}
auth {{ mtls {{ identities = [ {{ subject_cn = a, role = read }} ] }} }}""")
    assert any("checked by the front door: set front_door.enabled = true" in p for p in found), found


def test_a_jwks_file_without_usable_keys_is_refused(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    found = problems(tmp_path, f'auth {{ jwt {{ jwks_file = "{tmp_path}/jwks.json", issuer = i, audience = a }} }}')
    assert any(p.startswith("auth.jwt.jwks_file:") and "not a usable JWKS" in p for p in found), found


def test_secrets_are_read_when_a_port_starts_and_kept_only_hashed(tmp_path: Path) -> None:
    (tmp_path / "ops").write_text(SECRET + "\n")
    tokens = (TokenSettings("ops", Role.ADMIN, "file", str(tmp_path / "ops")),
              TokenSettings("app", Role.READ, "env", "APP_TOKEN"),
              TokenSettings("ci", Role.READ, "sha256", hashlib.sha256(b"another-secret-value-1").hexdigest()))
    resolved = resolve_tokens(tokens, {"APP_TOKEN": "  app-secret-0123456789 "})
    assert [c.digest for c in resolved] == [token_digest(SECRET), token_digest("app-secret-0123456789"),
                                            token_digest("another-secret-value-1")]
    assert SECRET not in repr(resolved) and token_digest(SECRET).hex() not in repr(resolved)


def test_unreadable_short_or_shared_secrets_are_refused_without_showing_them(tmp_path: Path) -> None:
    (tmp_path / "short").write_text("tiny")
    tokens = (TokenSettings("a", Role.ADMIN, "file", str(tmp_path / "missing")),
              TokenSettings("b", Role.READ, "env", "UNSET_TOKEN"),
              TokenSettings("c", Role.READ, "file", str(tmp_path / "short")),
              TokenSettings("d", Role.READ, "env", "SAME"),
              TokenSettings("e", Role.ADMIN, "sha256", token_digest(SECRET).hex()))
    with pytest.raises(ConfigError) as caught:
        resolve_tokens(tokens, {"SAME": SECRET})
    found = caught.value.problems
    assert found[0].startswith(f"auth.tokens[0] (a): no file at '{tmp_path}/missing'")
    assert found[1] == ("auth.tokens[1] (b): environment variable UNSET_TOKEN is not set or empty: it should hold "
                        "the token")
    assert found[2].startswith(f"auth.tokens[2] (c): the token in file {tmp_path}/short has 4 characters")
    assert found[3] == "auth.tokens: 'd' and 'e' have the same secret: give each its own"
    assert not any(SECRET in p or "tiny" in p for p in found)


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("", False), ("::", False), ("10.1.2.3", False),
                                            ("laredo.example.org", False)])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_listening_beyond_loopback_without_auth_warns_loudly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="laredo_core.auth.exposure"):
        assert warn_if_exposed("0.0.0.0", 4001, "oam", authenticated=False)
        assert not warn_if_exposed("0.0.0.0", 4001, "oam", authenticated=True)
        assert not warn_if_exposed("127.0.0.1", 4001, "oam", authenticated=False)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "0.0.0.0:4001" in record.getMessage() and "Configure an `auth` section" in record.getMessage()
