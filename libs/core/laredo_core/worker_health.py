"""One health address for a service run as `--workers N`: the launcher answers health_port for all its workers.

The launcher asks each worker's own endpoints (see laredo_core.workers) and answers
- GET /health/live: 200 while the launcher runs (it starts a dead worker again);
- GET /health/ready: 200 when every worker answers ready, 503 otherwise, with each worker's answer (a worker
  that is restarting, or does not answer within a second, is not ready);
- GET /metrics: every worker's metrics, each sample labelled `worker="<i>"` (a worker that does not answer is
  left out of that scrape and logged).
Readiness is asked every half second and kept, so a probe never waits on the workers. With TLS on the health
listeners, the launcher asks its workers over HTTPS on loopback without checking their certificate.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.health import HealthServer
from laredo_core.runtime import cancel

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.5
ASK_TIMEOUT = 1.0


def answers_for_workers(tls: TlsSettings | None) -> bool:
    """Whether the launcher can ask its workers (it has no client certificate to show)."""
    return tls is None or not tls.enabled or not tls.require_client_cert


class WorkerHealth:
    """The launcher's view of its workers' health endpoints at `host`:`ports[i]`."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, host: str, ports: Sequence[int], tls: TlsSettings | None) -> None:
        secure = tls is not None and tls.enabled
        self._base = [f"{'https' if secure else 'http'}://{_loopback(host)}:{port}" for port in ports]
        self._ssl: ssl.SSLContext | bool = _unverified() if secure else False
        self._answers: list[dict[str, Any]] = [{"ready": False, "error": "not asked yet"} for _ in ports]
        self._session: aiohttp.ClientSession | None = None

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        ready = all(answer.get("ready") is True for answer in self._answers)
        return ready, {"workers": [{"worker": i, **answer} for i, answer in enumerate(self._answers)]}

    async def run(self) -> None:
        """Ask every worker's readiness every POLL_INTERVAL until cancelled."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ASK_TIMEOUT)) as session:
            self._session = session
            try:
                while True:
                    self._answers = list(await asyncio.gather(*(self._ready(base) for base in self._base)))
                    await asyncio.sleep(POLL_INTERVAL)
            finally:
                self._session = None

    async def scrape(self) -> bytes:
        """Every worker's metrics, each sample labelled with its worker."""
        texts = await asyncio.gather(*(self._metrics(i, base) for i, base in enumerate(self._base)))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Labelled([(str(i), text) for i, text in enumerate(texts) if text is not None]))
        return generate_latest(registry)

    async def _ready(self, base: str) -> dict[str, Any]:
        try:
            async with self._get(f"{base}/health/ready") as response:
                answer = await response.json(content_type=None)
                if not isinstance(answer, dict):  # not a health answer: whatever listens there is not the worker
                    raise ValueError(f"HTTP {response.status} with {str(answer)[:100]!r}")
                return {**answer, "ready": response.status == 200 and answer.get("ready") is True}
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return {"ready": False, "error": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__}

    async def _metrics(self, index: int, base: str) -> str | None:
        try:
            async with self._get(f"{base}/metrics") as response:
                response.raise_for_status()
                return await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("metrics: worker %d did not answer (%s: %s); left out of this scrape", index,
                        type(exc).__name__, exc)
            return None

    def _get(self, url: str) -> Any:
        if self._session is None:  # a scrape before the first poll started
            raise aiohttp.ClientConnectionError("not asking yet")
        return self._session.get(url, ssl=self._ssl)


class _Labelled:
    """A collector of the workers' parsed metric families, each sample with its worker label."""

    def __init__(self, texts: list[tuple[str, str]]) -> None:
        self._texts = texts

    def collect(self) -> list[Metric]:
        families: dict[str, Metric] = {}
        for worker, text in self._texts:
            for family in text_string_to_metric_families(text):
                merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type,
                                                                 family.unit))
                merged.samples += [Sample(s.name, {**s.labels, "worker": worker}, s.value, s.timestamp, s.exemplar)
                                   for s in family.samples]
        return list(families.values())


async def serve_worker_health(host: str, port: int, worker_ports: Sequence[int],
                              tls: TlsSettings | None) -> tuple[HealthServer, asyncio.Task[None]]:
    """Start the launcher's health endpoints on host:port for the workers on `worker_ports`."""
    health = WorkerHealth(host, worker_ports, tls)
    poll = asyncio.create_task(health.run(), name="worker-health")
    try:
        server = await HealthServer(host, port, ready=health.readiness, tls=tls,
                                    metrics=health).start()  # type: ignore[arg-type]
    except BaseException:
        await cancel([poll])
        raise
    return server, poll


def _loopback(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _unverified() -> ssl.SSLContext:
    """The launcher asks its own children on this host: their certificate names the service, not loopback."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
