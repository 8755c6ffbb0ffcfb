"""Keys, JWKS files and tokens made at test time for the authentication tests."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://issuer.example.org"
AUDIENCE = "laredo"


@dataclass
class SigningKey:
    private: Any
    kid: str
    algorithm: str

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        return {**json.loads(algorithm.to_jwk(self.private.public_key())), "kid": self.kid, "use": "sig"}

    def token(self, claims: dict[str, Any] | None = None, *, expires_in: float = 300,
              headers: dict[str, Any] | None = None, **overrides: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "svc-reporting", "iat": now, "exp": now + expires_in,
                **(claims or {}), **overrides}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private, algorithm=self.algorithm, headers={"kid": self.kid, **(headers or {})})


def rsa_key(kid: str = "rsa-1") -> SigningKey:
    return SigningKey(rsa.generate_private_key(public_exponent=65537, key_size=2048), kid, "RS256")


def ec_key(kid: str = "ec-1") -> SigningKey:
    return SigningKey(ec.generate_private_key(ec.SECP256R1()), kid, "ES256")


def write_jwks(path: Path, *keys: SigningKey) -> Path:
    path.write_text(json.dumps({"keys": [k.jwk() for k in keys]}))
    return path
