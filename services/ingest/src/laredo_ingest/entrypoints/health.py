"""HTTP health for ingest: live while the loop runs, ready while the baseline is complete and streaming (not
while paused: see README, "Pause"); the body is the status report (phase, lag, rates, baseline progress, slot
state)."""

from __future__ import annotations

from typing import Any

from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.health import HealthServer
from laredo_core.metrics import MetricsEndpoint

from laredo_ingest.application.status import IngestStatus


def build_health_server(host: str, port: int, status: IngestStatus, *, tls: TlsSettings | None = None,
                        metrics: MetricsEndpoint | None = None) -> HealthServer:
    def ready() -> tuple[bool, dict[str, Any]]:
        report = status.report()
        if status.ready:
            report.pop("last_error", None)
        return status.ready, report

    return HealthServer(host, port, ready=ready, tls=tls, metrics=metrics)
