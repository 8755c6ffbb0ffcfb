"""Certificates made at test time (trustme) and NATS, Redis and S3 (moto) servers that speak only TLS."""

from __future__ import annotations

import socket
import ssl
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import trustme
from laredo_testing.servers import LOOPBACK, NatsServer, RedisServer, S3Server

from laredo_core.frontdoor.settings import TlsSettings


@dataclass(frozen=True)
class Certificates:
    """PEM files: `ca` signs the server certificate (localhost, 127.0.0.1) and the client certificate;
    `other_ca` signs nothing here, so a client that trusts only it rejects the servers."""

    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def listener(self, *, client_ca: bool = False, require_client_cert: bool = False) -> TlsSettings:
        return TlsSettings(str(self.server_cert), str(self.server_key), str(self.ca) if client_ca else "",
                           require_client_cert)

    def client_context(self, *, with_cert: bool = False) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    server, client = ca.issue_cert("localhost", LOOPBACK), ca.issue_cert("laredo-service")
    files = Certificates(*(directory / name for name in ("ca.pem", "other-ca.pem", "server.crt", "server.key",
                                                         "client.crt", "client.key")))
    ca.cert_pem.write_to_path(str(files.ca))
    other.cert_pem.write_to_path(str(files.other_ca))
    for issued, cert, key in ((server, files.server_cert, files.server_key),
                              (client, files.client_cert, files.client_key)):
        cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(str(key))
    return files


class _TlsOnly:
    """Makes a test server speak only TLS with `certificates`; `verify_clients`: client certificates required."""

    def __init__(self, certificates: Certificates, run_dir: Path | None = None, *,
                 verify_clients: bool = False) -> None:
        super().__init__(run_dir)  # type: ignore[call-arg]  # the server class that follows in the MRO
        self.certificates, self.verify_clients = certificates, verify_clients


class TlsNatsServer(_TlsOnly, NatsServer):
    """nats-server with JetStream that requires TLS (and, with `verify_clients`, a client certificate)."""

    name = "nats-tls"

    @property
    def url(self) -> str:
        return f"tls://{LOOPBACK}:{self.port}"

    def _command(self) -> list[str]:
        c = self.certificates
        tls = ["--tlsverify", "--tlscacert", str(c.ca)] if self.verify_clients else ["--tls"]
        return [*super()._command(), *tls, "--tlscert", str(c.server_cert), "--tlskey", str(c.server_key)]


class TlsRedisServer(_TlsOnly, RedisServer):
    """redis-server listening only for TLS; client certificates are optional (or required with `verify_clients`)."""

    name = "redis-tls"

    @property
    def url(self) -> str:
        return f"rediss://{LOOPBACK}:{self.port}/0"

    def _command(self) -> list[str]:
        c = self.certificates
        command = super()._command()
        command[command.index("--port") + 1] = "0"  # no cleartext port
        return [*command, "--tls-port", str(self.port), "--tls-cert-file", str(c.server_cert),
                "--tls-key-file", str(c.server_key), "--tls-ca-cert-file", str(c.ca),
                "--tls-auth-clients", "yes" if self.verify_clients else "optional"]

    def _is_ready(self) -> bool:
        context = self.certificates.client_context(with_cert=True)
        with socket.create_connection((LOOPBACK, self.port), timeout=1.0) as raw, \
                context.wrap_socket(raw, server_hostname=LOOPBACK) as conn:
            conn.sendall(b"*1\r\n$4\r\nPING\r\n")
            return conn.recv(64).startswith(b"+PONG")


class TlsS3Server(_TlsOnly, S3Server):
    """moto's S3 server on HTTPS with the test certificate."""

    name = "s3-tls"

    def _command(self) -> list[str]:
        super()._command()  # checks that moto's server is installed
        c = self.certificates
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port),
                "-c", str(c.server_cert), "-k", str(c.server_key)]

    def _is_ready(self) -> bool:
        return https_ok(f"https://{LOOPBACK}:{self.port}/moto-api/", self.certificates.client_context())


def https_ok(url: str, context: ssl.SSLContext) -> bool:
    with urllib.request.urlopen(url, timeout=1.0, context=context) as response:  # noqa: S310 - loopback only
        return bool(response.status == 200)

