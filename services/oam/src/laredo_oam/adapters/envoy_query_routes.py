"""The front door's query endpoints as a file-based EDS document that Envoy watches (atomic rename)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Sequence

from laredo_core.frontdoor.envoy_config import Upstream, endpoints_document

log = logging.getLogger(__name__)

CLUSTER = "query"
#: The Query service under the specification's and upstream's names.
QUERY_PREFIXES = ("/laredo.v1.TableSyncQuery/", "/laredo.v1.LaredoQueryService/")


class EnvoyQueryRoutes:
    """Owns a private directory holding the document; `upstream()` is what the front door routes with."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="laredo-oam-routes-")
        self.path = os.path.join(self.directory, "query-endpoints.json")
        self._version = 0
        self._write([])

    def upstream(self, *, tls_ca: str = "", tls_cert: str = "", tls_key: str = "",
                 tls_server_name: str = "") -> Upstream:
        return Upstream(CLUSTER, QUERY_PREFIXES, self.path, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                        tls_server_name=tls_server_name)

    async def publish(self, addresses: Sequence[str]) -> None:
        endpoints: list[tuple[str, int]] = []
        loop = asyncio.get_running_loop()
        for address in addresses:
            host, _, port = address.rpartition(":")
            host = host.strip("[]")
            try:
                infos = await loop.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
            except (OSError, ValueError) as exc:
                log.warning("query instance address %r does not resolve (%s); set query.advertise_address to "
                            "an address OAM can reach", address, exc)
                continue
            endpoints.append((str(infos[0][4][0]), int(port)))
        self._write(endpoints)

    def _write(self, endpoints: list[tuple[str, int]]) -> None:
        self._version += 1
        document = endpoints_document(CLUSTER, endpoints, str(self._version))
        fd, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            json.dump(document, out)
        os.replace(temporary, self.path)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
