"""TLS settings and SSL contexts: the `tls { ca, cert, key }` sections of the services' own connections (NATS,
Redis) and the listener side of the shared `tls { cert, key, client_ca, require_client_cert }` section.

Only the standard library's ssl here, so the settings layer may import it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from laredo_kernel.errors import ConfigError

if TYPE_CHECKING:  # at run time neither is needed; importing them here would make the settings import circular
    from laredo_core.config.reader import Reader
    from laredo_core.frontdoor.settings import TlsSettings


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a service connects to a TLS server.

    `ca` (PEM) verifies the server's certificate; empty: the system's CAs. `cert` and `key` (PEM) identify the
    service to a server that asks for client certificates (mutual TLS). `section` names the settings it came from
    (e.g. `stream.tls`), for error messages.
    """

    ca: str = ""
    cert: str = ""
    key: str = ""
    section: str = field(default="", compare=False)

    @property
    def configured(self) -> bool:
        return bool(self.ca or self.cert)


def read_client_tls(r: Reader) -> ClientTls:
    """A `tls { ca, cert, key }` section; each named file must exist and load, cert and key go together."""
    tls = ClientTls(r.string("ca", ""), r.string("cert", ""), r.string("key", ""), section=r.path)
    if bool(tls.cert) != bool(tls.key):
        r.problem("cert" if not tls.cert else "key",
                  "cert and key go together: set both (the PEM files of the client certificate) or neither")
    missing = False
    for key in ("ca", "cert", "key"):
        path = getattr(tls, key)
        if path and not Path(path).is_file():
            r.problem(key, f"no file at {path!r}")
            missing = True
    if tls.configured and not missing and bool(tls.cert) == bool(tls.key):
        try:
            client_ssl_context(tls)
        except ConfigError as exc:
            r.problems.extend(exc.problems)
    r.check_unknown()
    return tls


def client_ssl_context(tls: ClientTls) -> ssl.SSLContext:
    """A context that verifies the server (against `ca`, else the system's CAs) and presents `cert` if set."""
    try:
        context = ssl.create_default_context(cafile=tls.ca or None)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError([f"{_key(tls.section, 'ca')}: cannot load the CA certificates from {tls.ca!r} ({exc}); "
                           "expected a PEM file"]) from exc
    if tls.cert:
        _load_chain(context, tls.cert, tls.key, tls.section)
    return context


def server_ssl_context(tls: TlsSettings, section: str = "tls") -> ssl.SSLContext:
    """A listener's context: its certificate; with `client_ca`, client certificates are verified against it and,
    with `require_client_cert`, required."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_chain(context, tls.cert, tls.key, section)
    if tls.client_ca:
        try:
            context.load_verify_locations(cafile=tls.client_ca)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError([f"{_key(section, 'client_ca')}: cannot load the CA certificates from "
                               f"{tls.client_ca!r} ({exc}); expected a PEM file"]) from exc
        context.verify_mode = ssl.CERT_REQUIRED if tls.require_client_cert else ssl.CERT_OPTIONAL
    return context


def _load_chain(context: ssl.SSLContext, cert: str, key: str, section: str) -> None:
    try:
        context.load_cert_chain(cert, key or None)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError([f"{_key(section, 'cert')}: cannot use the certificate {cert!r} with the key {key!r} "
                           f"({exc}); expected PEM files, the key matching the certificate"]) from exc


def _key(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name
