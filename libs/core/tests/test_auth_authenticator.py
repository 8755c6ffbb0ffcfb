"""Credentials from request headers: static tokens (hashed, constant-time), JWTs, client certificates."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from laredo_core.auth.authenticator import Authenticator
from laredo_core.auth.identity import Identity, Role
from laredo_core.auth.policy import Refusal, RefusalKind
from laredo_core.auth.settings import AuthSettings, CertificateIdentity, JwtSettings, TokenSettings
from libs.core.tests.auth_keys import AUDIENCE, ISSUER, rsa_key, write_jwks

OPS_SECRET, APP_SECRET = "ops-token-0123456789abcdef", "app-token-0123456789abcdef"
METHOD = "/laredo.v1.TableSyncOAM/GetStatus"
CERT = 'Hash=aa;Subject="CN=ops-client,O=trustme";URI=spiffe://example.org/app;DNS=reporting.internal'


def settings(**extra: object) -> AuthSettings:
    tokens = (TokenSettings("ops", Role.ADMIN, "env", "OPS"),
              TokenSettings("app", Role.READ, "sha256", hashlib.sha256(APP_SECRET.encode()).hexdigest(),
                            frozenset({"public.orders"})))
    return AuthSettings(tokens=tokens, **extra)  # type: ignore[arg-type]


def authenticator(trust: bool = False, **extra: object) -> Authenticator:
    return Authenticator(settings(**extra), trust_client_cert_header=trust, environ={"OPS": OPS_SECRET})


@pytest.mark.parametrize("header, expected", [
    (f"Bearer {OPS_SECRET}", Identity("ops", Role.ADMIN)),
    (f"bearer   {APP_SECRET} ", Identity("app", Role.READ, frozenset({"public.orders"}))),
])
def test_static_tokens(header: str, expected: Identity) -> None:
    assert authenticator().authenticate({"authorization": header}, METHOD) == expected


@pytest.mark.parametrize("headers, reason", [
    ({}, "none was sent"),
    ({"authorization": "Bearer wrong-token-0123456789"}, "the bearer token is not one this service knows"),
    ({"authorization": f"Basic {OPS_SECRET}"}, "the authorization header is not `Bearer <token>`"),
    ({"authorization": "Bearer "}, "the authorization header is not `Bearer <token>`"),
    ({"x-forwarded-client-cert": CERT}, "none was sent"),  # not trusted: no mutual TLS at our door
])
def test_missing_or_unknown_credentials_are_unauthenticated(headers: dict[str, str], reason: str) -> None:
    refusal = authenticator().authenticate(headers, METHOD)
    assert isinstance(refusal, Refusal) and refusal.kind is RefusalKind.UNAUTHENTICATED
    assert refusal.message == (f"{METHOD} needs a credential ({reason}): send the header "
                               "`authorization: Bearer <token>`")
    assert OPS_SECRET not in refusal.message


@pytest.mark.parametrize("identity, expected", [
    (CertificateIdentity("ops-cert", "subject_cn", "ops-client", Role.ADMIN), "ops-cert"),
    (CertificateIdentity("app-cert", "uri", "spiffe://example.org/app", Role.READ), "app-cert"),
    (CertificateIdentity("rep-cert", "dns", "reporting.internal", Role.READ), "rep-cert"),
])
def test_client_certificates_by_cn_uri_or_dns(identity: CertificateIdentity, expected: str) -> None:
    found = authenticator(True, certificates=(identity,)).authenticate({"x-forwarded-client-cert": CERT}, METHOD)
    assert isinstance(found, Identity) and found.name == expected and found.kind == "client certificate"


def test_an_unlisted_certificate_is_named_and_refused() -> None:
    check = authenticator(True, certificates=(CertificateIdentity("x", "subject_cn", "someone", Role.READ),))
    refusal = check.authenticate({"x-forwarded-client-cert": CERT}, METHOD)
    assert isinstance(refusal, Refusal) and refusal.kind is RefusalKind.UNAUTHENTICATED
    assert "'CN=ops-client,O=trustme' is not listed in auth.mtls.identities" in refusal.message
    assert refusal.message.endswith("or connect with a client certificate listed in auth.mtls.identities")


def test_a_presented_token_must_verify_even_with_a_good_certificate() -> None:
    check = authenticator(True, certificates=(CertificateIdentity("c", "subject_cn", "ops-client", Role.ADMIN),))
    refusal = check.authenticate({"authorization": "Bearer nope-0123456789abcdef",
                                  "x-forwarded-client-cert": CERT}, METHOD)
    assert isinstance(refusal, Refusal)


def test_jwts_after_static_tokens(tmp_path: Path) -> None:
    key = rsa_key()
    jwt_settings = JwtSettings(str(write_jwks(tmp_path / "jwks.json", key)), ISSUER, AUDIENCE)
    check = authenticator(jwt=jwt_settings)
    found = check.authenticate({"authorization": f"Bearer {key.token({'laredo_role': 'admin'})}"}, METHOD)
    assert found == Identity("jwt:svc-reporting", Role.ADMIN, kind="jwt")
    refusal = check.authenticate({"authorization": f"Bearer {key.token(expires_in=-300)}"}, METHOD)
    assert isinstance(refusal, Refusal) and "(the JWT was refused: it has expired)" in refusal.message
    assert check.authenticate({"authorization": f"Bearer {OPS_SECRET}"}, METHOD) == Identity("ops", Role.ADMIN)
