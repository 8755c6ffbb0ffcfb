"""Composition root of the query service: settings in, a gRPC server and HTTP health endpoints out."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
from typing import Any

from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings, ServiceEndpoint, check_service_section
from laredo_core.errors import LaredoError
from laredo_core.grpc_server import GrpcServer, ServiceRegistration, start_grpc_server
from laredo_core.health import HealthServer

from laredo_query.entrypoints.grpc.servicer import query_registration

log = logging.getLogger(__name__)


class App:
    """The query service: gRPC (query RPCs, health, reflection) and /health/{live,ready}.

    `grpc_port` and `health_port` are the bound ports once `started` is set (port 0 picks free ones).
    Ready from the moment the gRPC server serves until shutdown begins.
    """

    def __init__(self, endpoint: ServiceEndpoint, registration: ServiceRegistration) -> None:
        self.endpoint = endpoint
        self.started = asyncio.Event()
        self._registration = registration
        self._grpc: GrpcServer | None = None
        self._stopping = False
        self.health = HealthServer(endpoint.health_host, endpoint.health_port, ready=self._readiness)

    @property
    def grpc_port(self) -> int:
        return self._grpc.port if self._grpc else 0

    @property
    def health_port(self) -> int:
        return self.health.port

    def _readiness(self) -> tuple[bool, dict[str, Any]]:
        serving = self._grpc is not None and not self._stopping
        return serving, {"grpc": "serving" if serving else "not serving"}

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set; then unready, stop gRPC (drain_grace), stop health."""
        try:
            await _listen("query.health_host/query.health_port", self.health.start())
            self._grpc = await _listen("query.grpc.host/query.grpc.port", start_grpc_server(
                self.endpoint.grpc_host, self.endpoint.grpc_port, [self._registration]))
            self.started.set()
            log.info("query service ready: gRPC on port %d, health on port %d (query RPCs answer "
                     "UNIMPLEMENTED until a later release)", self.grpc_port, self.health_port)
            await stop.wait()
        finally:
            self._stopping = True
            if self._grpc is not None:
                await self._grpc.set_serving(False)
                await self._grpc.stop(self.endpoint.drain_grace)
            await self.health.stop()


async def _listen(keys: str, starting: Any) -> Any:
    try:
        return await starting
    except OSError as exc:
        raise LaredoError(f"query service cannot listen: {exc}; choose a free port with {keys} "
                          "(0 picks one)") from exc


def build(settings: LaredoSettings, **overrides: Any) -> App:
    """The app from settings; `overrides` replace fields of settings.query (grpc_port=0, health_host=...)."""
    unknown = set(overrides) - {f.name for f in dataclasses.fields(ServiceEndpoint)}
    if unknown:
        raise TypeError(f"build() got unknown overrides {sorted(unknown)}; "
                        f"expected fields of ServiceEndpoint")
    check_service_section(settings.query.options, "query")
    endpoint = dataclasses.replace(settings.query, **overrides)
    return App(endpoint, query_registration())


async def _serve(settings: LaredoSettings, _: argparse.Namespace, stop: asyncio.Event) -> None:
    await build(settings).run(stop)


def cli() -> None:
    sys.exit(run_service("laredo-query", "Laredo query service (indexed reads; RPCs arrive in a later release)",
                         _serve,
                         validate=lambda settings, _: check_service_section(settings.query.options, "query")))


if __name__ == "__main__":
    cli()
