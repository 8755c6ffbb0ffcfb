"""The live state of one ingest run, read by health checks, metrics and tests."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class IngestPhase(enum.Enum):
    STARTING = "starting"
    BASELINE = "baseline"
    STREAMING = "streaming"
    RECONNECTING = "reconnecting"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(slots=True)
class IngestStatus:
    phase: IngestPhase = IngestPhase.STARTING
    confirmed_lsn: int = 0  # last LSN sent to PostgreSQL as flushed
    published_messages: int = 0  # acknowledged by JetStream
    transactions: int = 0
    baseline_rows: int = 0
    baseline_complete: bool = False
    baseline_id: str = ""
    restarts: int = 0
    last_error: str = ""

    @property
    def ready(self) -> bool:
        return self.phase is IngestPhase.STREAMING and self.baseline_complete
