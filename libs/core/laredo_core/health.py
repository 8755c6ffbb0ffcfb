"""HTTP health endpoints for every service: GET /health/live and /health/ready (200 or 503, JSON), GET /metrics;
with the shared `tls` section HTTPS only (a cleartext request gets 426 and what to do)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.metrics import MetricsEndpoint
from laredo_core.redaction import scrub_tree
from laredo_core.tls import server_ssl_context
from laredo_core.tls_listener import TlsOnlyListener

log = logging.getLogger(__name__)

#: Returns (ready, details); details explain what is not ready yet.
ReadinessProbe = Callable[[], tuple[bool, dict[str, Any]]]


class HealthServer:
    """Serves liveness, readiness and (given `metrics`) Prometheus's GET /metrics; port 0 picks a free port (see
    .port after start)."""

    def __init__(self, host: str, port: int, *, ready: ReadinessProbe,
                 live: Callable[[], bool] = lambda: True, tls: TlsSettings | None = None,
                 metrics: MetricsEndpoint | None = None) -> None:
        self.metrics = metrics
        self._host, self._requested_port = host, port
        self._ready, self._live = ready, live
        self._tls = tls if tls is not None and tls.enabled else None
        self._runner: web.AppRunner | None = None
        self._tls_listener: TlsOnlyListener | None = None  # with TLS: HTTPS, and 426 to cleartext requests
        self.port = 0

    async def start(self) -> HealthServer:
        """Listen (an error leaves nothing behind); returns this server, its port known."""
        app = web.Application()
        app.router.add_get("/health/live", self._live_handler)
        app.router.add_get("/health/ready", self._ready_handler)
        if self.metrics is not None:
            app.router.add_get("/metrics", self._metrics_handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        try:
            if self._tls is not None:
                self._tls_listener = TlsOnlyListener(self._runner.server, server_ssl_context(self._tls))
                await self._tls_listener.start(self._host, self._requested_port)
                self.port = self._tls_listener.port
            else:
                site = web.TCPSite(self._runner, self._host, self._requested_port)
                await site.start()
                server = site._server  # aiohttp exposes the bound socket only here
                self.port = server.sockets[0].getsockname()[1] if server and server.sockets else self._requested_port
        except BaseException:
            await self.stop()
            raise
        log.info("health endpoints on %s://%s:%d/health/{live,ready}%s%s", self.scheme, self._host, self.port,
                 " and /metrics" if self.metrics is not None else "", _client_certs(self._tls))
        return self

    @property
    def scheme(self) -> str:
        return "https" if self._tls is not None else "http"

    async def stop(self) -> None:
        if self._tls_listener is not None:
            await self._tls_listener.close()
            self._tls_listener = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _live_handler(self, _: web.Request) -> web.Response:
        alive = self._live()
        return web.json_response({"status": "ok" if alive else "failing"}, status=200 if alive else 503)

    async def _metrics_handler(self, _: web.Request) -> web.Response:
        assert self.metrics is not None
        return web.Response(body=await self.metrics.scrape(), headers={"Content-Type": self.metrics.content_type})

    async def _ready_handler(self, _: web.Request) -> web.Response:
        ready, details = self._ready()
        return web.json_response(scrub_tree({"ready": ready, **details}), status=200 if ready else 503)


def _client_certs(tls: TlsSettings | None) -> str:
    if tls is None or not tls.client_ca:
        return ""
    return " (client certificate required)" if tls.require_client_cert else " (client certificates verified)"
