"""JSON Web Tokens checked against the keys of a JWKS file: signature, issuer, audience, expiry.

The algorithms allowed are the keys' own (their "alg", else what their type implies), so a token cannot pick
a weaker one, and "none" never verifies. A token whose key id is not in the file makes the file be read again
when it changed on disk (keys rotated), at most once per REREAD_INTERVAL.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import jwt

from laredo_core.auth.identity import Identity, Role, parse_table_pattern
from laredo_core.auth.settings import JwtSettings

log = logging.getLogger(__name__)

REREAD_INTERVAL = 10.0


class InvalidToken(Exception):
    """The token does not verify; the message says why without quoting it."""


def load_jwks(path: str) -> jwt.PyJWKSet:
    """The usable signing keys of a JWKS file; ValueError naming the file and the problem."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"no file at {path!r}: it should hold the JSON Web Key Set (JWKS) of the token "
                         "issuer") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the JWKS file {path!r}: {type(exc).__name__}: {exc}") from None
    try:
        keys = jwt.PyJWKSet.from_dict(document)
    except (jwt.PyJWKSetError, jwt.PyJWKError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path!r} is not a usable JWKS ({{\"keys\": [...]}}): {exc}") from None
    return keys


class JwksKeys:
    """The keys of one JWKS file, looked up by key id; re-read when an unknown id appears and the file changed."""

    def __init__(self, path: str, clock: Any = time.monotonic) -> None:
        self._path, self._clock = path, clock
        self._keys = load_jwks(path)
        self._mtime = self._stat()
        self._checked = clock()

    def _stat(self) -> float:
        try:
            return os.stat(self._path).st_mtime
        except OSError:
            return 0.0

    def find(self, kid: str | None) -> jwt.PyJWK:
        key = self._lookup(kid)
        if key is None and self._clock() - self._checked >= REREAD_INTERVAL:
            self._checked = self._clock()
            if self._stat() != self._mtime:
                self._reload()
                key = self._lookup(kid)
        if key is None:
            raise InvalidToken(f"its key id {kid!r} is not in the JWKS file" if kid else
                               "it names no key id (kid) and the JWKS file holds several keys")
        return key

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        keys = self._keys.keys
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.key_id == kid), None)

    def _reload(self) -> None:
        try:
            self._keys = load_jwks(self._path)
            self._mtime = self._stat()
            log.info("re-read the JWKS file %s: %d key(s)", self._path, len(self._keys.keys))
        except ValueError as exc:  # keep the keys that worked; the file may be half-written
            log.error("keeping the previous JWT keys: %s", exc)


class JwtVerifier:
    """Verifies a token and turns its claims into an Identity ("jwt:<name claim>")."""

    def __init__(self, settings: JwtSettings, keys: JwksKeys | None = None) -> None:
        self._settings = settings
        self._keys = keys or JwksKeys(settings.jwks_file)

    def identity(self, token: str) -> Identity:
        claims = self._claims(token)
        s = self._settings
        name = f"jwt:{claims.get(s.name_claim) or 'unnamed'}"
        return Identity(name, _role(claims.get(s.role_claim)), _tables(claims, s.tables_claim), kind="jwt")

    def _claims(self, token: str) -> Mapping[str, Any]:
        s = self._settings
        try:
            header = jwt.get_unverified_header(token)
            key = self._keys.find(header.get("kid"))
            return jwt.decode(token, key, algorithms=[key.algorithm_name], audience=s.audience, issuer=s.issuer,
                              leeway=s.leeway, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise InvalidToken("it has expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(f"it is not meant for this service (audience must be {s.audience!r})") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken(f"it was not issued by {s.issuer!r}") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("its signature does not verify with the configured keys") from None
        except jwt.InvalidAlgorithmError:
            raise InvalidToken("it is signed with an algorithm its key does not use") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"it lacks the {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"it is not a valid JWT ({type(exc).__name__})") from None


def _role(value: Any) -> Role | None:
    """The highest Laredo role among the claim's values (a string or a list of strings); None when none."""
    values = value if isinstance(value, list) else [value]
    roles = []
    for item in values:
        try:
            roles.append(Role.parse(str(item)))
        except ValueError:
            continue
    return max(roles, default=None)


def _tables(claims: Mapping[str, Any], claim: str) -> frozenset[str] | None:
    if claim not in claims:
        return None
    value = claims[claim]
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
    patterns = set()
    for item in items:
        try:
            patterns.add(parse_table_pattern(str(item)))
        except ValueError:
            continue  # an unreadable entry grants nothing
    return frozenset(patterns)
