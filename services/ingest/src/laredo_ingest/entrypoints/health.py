"""HTTP health for ingest: live while the loop runs, ready while the baseline is complete and streaming."""

from __future__ import annotations

from typing import Any

from laredo_core.health import HealthServer
from laredo_core.position import format_lsn

from laredo_ingest.application.status import IngestStatus


def build_health_server(host: str, port: int, status: IngestStatus) -> HealthServer:
    def ready() -> tuple[bool, dict[str, Any]]:
        return status.ready, {
            "phase": status.phase.value,
            "baseline_complete": status.baseline_complete,
            "confirmed_lsn": format_lsn(status.confirmed_lsn),
            **({"last_error": status.last_error} if status.last_error and not status.ready else {}),
        }

    return HealthServer(host, port, ready=ready)
