"""JWTs verified against a JWKS file: issuer, audience, expiry, the keys' own algorithms, rotation."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from laredo_core.auth.identity import Identity, Role
from laredo_core.auth.jwt_verifier import InvalidToken, JwksKeys, JwtVerifier, load_jwks
from laredo_core.auth.settings import JwtSettings
from libs.core.tests.auth_keys import AUDIENCE, ISSUER, ec_key, rsa_key, write_jwks


@pytest.fixture(scope="module")
def keys():  # noqa: ANN201
    return rsa_key("rsa-1"), ec_key("ec-1"), rsa_key("rsa-1")  # the last: same kid, another key (an impostor)


def verifier(path: Path, **settings: object) -> JwtVerifier:
    return JwtVerifier(JwtSettings(str(path), ISSUER, AUDIENCE, **settings))  # type: ignore[arg-type]


def test_a_valid_token_gives_its_subject_role_and_tables(tmp_path: Path, keys) -> None:  # noqa: ANN001
    rsa, ec, _ = keys
    check = verifier(write_jwks(tmp_path / "jwks.json", rsa, ec))
    assert check.identity(rsa.token({"laredo_role": "admin"})) == Identity("jwt:svc-reporting", Role.ADMIN,
                                                                          kind="jwt")
    limited = check.identity(ec.token({"laredo_role": ["read", "other"], "laredo_tables": ["public.orders", "x"]},
                                      sub="app"))
    assert limited == Identity("jwt:app", Role.READ, frozenset({"public.orders", "public.x"}), kind="jwt")


def test_a_token_without_a_laredo_role_proves_an_identity_but_grants_nothing(tmp_path: Path, keys) -> None:  # noqa
    check = verifier(write_jwks(tmp_path / "jwks.json", keys[0]))
    identity = check.identity(keys[0].token({"laredo_role": "owner"}))
    assert identity.role is None and not identity.may(Role.READ)


def test_claims_are_configurable(tmp_path: Path, keys) -> None:  # noqa: ANN001
    check = verifier(write_jwks(tmp_path / "jwks.json", keys[0]), role_claim="roles", tables_claim="scope_tables",
                     name_claim="client_id")
    identity = check.identity(keys[0].token({"roles": "read", "scope_tables": "public.a,public.b",
                                             "client_id": "dash"}))
    assert identity == Identity("jwt:dash", Role.READ, frozenset({"public.a", "public.b"}), kind="jwt")


@pytest.mark.parametrize("case, reason", [
    ("impostor", "its signature does not verify with the configured keys"),
    ("audience", "it is not meant for this service (audience must be 'laredo')"),
    ("issuer", f"it was not issued by {ISSUER!r}"),
    ("expired", "it has expired"),
    ("no-exp", "it lacks the 'exp' claim"),
    ("unknown-kid", "its key id 'other' is not in the JWKS file"),
    ("alg-none", "it is signed with an algorithm its key does not use"),
    ("hs256-with-public-key", "it is signed with an algorithm its key does not use"),
    ("garbage", "it is not a valid JWT"),
])
def test_bad_tokens_are_refused_with_the_reason(tmp_path: Path, keys, case: str, reason: str) -> None:  # noqa
    rsa, _, impostor = keys
    check = verifier(write_jwks(tmp_path / "jwks.json", rsa))
    token = {
        "impostor": lambda: impostor.token({"laredo_role": "admin"}),
        "audience": lambda: rsa.token(aud="someone-else"),
        "issuer": lambda: rsa.token(iss="https://evil.example"),
        "expired": lambda: rsa.token(expires_in=-120),
        "no-exp": lambda: rsa.token(exp=None),
        "unknown-kid": lambda: rsa.token(headers={"kid": "other"}),
        "alg-none": lambda: _unsigned({"iss": ISSUER, "aud": AUDIENCE, "exp": 4_000_000_000, "laredo_role": "admin"}),
        "hs256-with-public-key": lambda: _hmac_with_public_key(rsa),
        "garbage": lambda: "a.b.c",
    }[case]()
    with pytest.raises(InvalidToken) as caught:
        check.identity(token)
    assert str(caught.value).startswith(reason)


def test_leeway_allows_small_clock_skew(tmp_path: Path, keys) -> None:  # noqa: ANN001
    check = verifier(write_jwks(tmp_path / "jwks.json", keys[0]), leeway=60.0)
    assert check.identity(keys[0].token({"laredo_role": "read"}, expires_in=-10)).role is Role.READ


def test_rotated_keys_are_read_again_when_an_unknown_key_id_arrives(tmp_path: Path, keys) -> None:  # noqa
    rsa, ec, _ = keys
    path = write_jwks(tmp_path / "jwks.json", rsa)
    now = [0.0]
    check = JwtVerifier(JwtSettings(str(path), ISSUER, AUDIENCE), JwksKeys(str(path), clock=lambda: now[0]))
    write_jwks(path, rsa, ec)
    os.utime(path, (1e9, 1e9))
    with pytest.raises(InvalidToken):  # too soon: the file is not read on every unknown key id
        check.identity(ec.token({"laredo_role": "read"}))
    now[0] = 60.0
    assert check.identity(ec.token({"laredo_role": "read"})).role is Role.READ


def test_a_jwks_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text("not json")
    with pytest.raises(ValueError, match="cannot read the JWKS file"):
        load_jwks(str(tmp_path / "jwks.json"))


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _unsigned(claims: dict[str, object]) -> str:
    return f"{_b64({'alg': 'none', 'kid': 'rsa-1'})}.{_b64(claims)}."


def _hmac_with_public_key(key) -> str:  # noqa: ANN001
    """The classic confusion: an HS256 token whose HMAC secret is the RSA public key's PEM."""
    from cryptography.hazmat.primitives import serialization

    pem = key.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    header = _b64({"alg": "HS256", "kid": key.kid, "typ": "JWT"})
    body = _b64({"iss": ISSUER, "aud": AUDIENCE, "exp": 4_000_000_000, "laredo_role": "admin"})
    import hashlib
    import hmac
    signature = base64.urlsafe_b64encode(hmac.new(pem, f"{header}.{body}".encode(), hashlib.sha256).digest())
    return f"{header}.{body}.{signature.rstrip(b'=').decode()}"
