"""Who is calling: a bearer token (static or JWT) from `authorization`, else the client certificate the front
door reports. A presented token must verify; it is never passed over for the certificate."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from laredo_core.auth.identity import Identity
from laredo_core.auth.jwt_verifier import InvalidToken, JwtVerifier
from laredo_core.auth.policy import Refusal, unauthenticated
from laredo_core.auth.settings import AuthSettings, CertificateIdentity, resolve_tokens, token_digest
from laredo_core.auth.xfcc import HEADER as CLIENT_CERT_HEADER
from laredo_core.auth.xfcc import ClientCertificate, parse_client_certificate


class Authenticator:
    """Identities from request metadata. `trust_client_cert_header` only when our front door sets that header
    (mutual TLS configured): otherwise a client could write it. Token secrets are read here (ConfigError when
    one cannot be)."""

    def __init__(self, settings: AuthSettings, *, trust_client_cert_header: bool,
                 environ: Mapping[str, str] | None = None) -> None:
        self._tokens = resolve_tokens(settings.tokens, environ)
        self._jwt = JwtVerifier(settings.jwt) if settings.jwt is not None else None
        self._certificates = settings.certificates if trust_client_cert_header else ()

    def authenticate(self, metadata: Mapping[str, str], method: str) -> Identity | Refusal:
        authorization = metadata.get("authorization", "")
        if authorization:
            return self._bearer(authorization, method)
        header = metadata.get(CLIENT_CERT_HEADER, "") if self._certificates else ""
        certificate = parse_client_certificate(header) if header else None
        if certificate is not None:
            return self._certificate(certificate, method)
        return self._refuse(method, "none was sent")

    def _refuse(self, method: str, reason: str, credential: str = "") -> Refusal:
        return unauthenticated(method, reason, certificates=bool(self._certificates), credential=credential)

    def _bearer(self, authorization: str, method: str) -> Identity | Refusal:
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return self._refuse(method, "the authorization header is not `Bearer <token>`")
        digest = token_digest(token)
        found = None
        for credential in self._tokens:  # every digest compared, in constant time each
            if hmac.compare_digest(digest, credential.digest):
                found = credential
        if found is not None:
            return Identity(found.name, found.role, found.tables, kind="token")
        if self._jwt is not None and token.count(".") == 2:
            try:
                return self._jwt.identity(token)
            except InvalidToken as exc:
                return self._refuse(method, f"the JWT was refused: {exc}", "jwt")
        return self._refuse(method, "the bearer token is not one this service knows")

    def _certificate(self, certificate: ClientCertificate, method: str) -> Identity | Refusal:
        for identity in self._certificates:
            if _matches(identity, certificate):
                return Identity(identity.name, identity.role, identity.tables, kind="client certificate")
        return self._refuse(method, f"the client certificate {certificate.describe()!r} is not listed in "
                                    "auth.mtls.identities", certificate.describe())


def _matches(identity: CertificateIdentity, certificate: ClientCertificate) -> bool:
    if identity.field == "subject_cn":
        return certificate.common_name == identity.value
    if identity.field == "uri":
        return identity.value in certificate.uris
    return identity.value in certificate.dns_names
