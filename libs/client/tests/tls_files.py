"""Certificates for tests, made at test time (trustme): a CA, a server certificate, client certificates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
import trustme

CLIENT_IDENTITY = "client@example.com"
CLIENT_NAME = "laredo-robot"  # the client certificate's Subject CN


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: `ca` signs the server's and the client's certificates; `stranger_*` is a client certificate
    from a CA nobody trusts. The server certificate names localhost and 127.0.0.1."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path

    def server_credentials(self, *, require_client_cert: bool = False) -> grpc.ServerCredentials:
        """For a grpc.aio test server; with `require_client_cert`, clients must show a certificate of `ca`."""
        pair = [(self.server_key.read_bytes(), self.server_cert.read_bytes())]
        return grpc.ssl_server_credentials(pair, root_certificates=self.ca.read_bytes() if require_client_cert
                                           else None, require_client_auth=require_client_cert)


def write_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert(CLIENT_IDENTITY, common_name=CLIENT_NAME)
    stranger = trustme.CA().issue_cert(CLIENT_IDENTITY)
    files = TlsFiles(*(directory / name for name in ("ca.pem", "server.crt", "server.key", "client.crt",
                                                     "client.key", "stranger.crt", "stranger.key")))
    ca.cert_pem.write_to_path(str(files.ca))
    for issued, cert, key in ((server, files.server_cert, files.server_key),
                              (client, files.client_cert, files.client_key),
                              (stranger, files.stranger_cert, files.stranger_key)):
        issued.cert_chain_pems[0].write_to_path(str(cert))
        issued.private_key_pem.write_to_path(str(key))
    return files
