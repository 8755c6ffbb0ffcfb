"""The live state of one ingest run, read by health checks, metrics, status heartbeats and tests."""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.position import format_lsn

from laredo_ingest.domain.baseline_reason import BaselineReason, TableBaseline
from laredo_ingest.domain.batches import OutboundBatch

log = logging.getLogger(__name__)


class IngestPhase(enum.Enum):
    STANDBY = "standby"  # waiting for the leader lease
    STARTING = "starting"
    BASELINE = "baseline"
    STREAMING = "streaming"
    PAUSED = "paused"  # an operator paused reading the slot; the position is held
    REBASELINE = "rebaseline"  # streaming is held while tables are re-baselined on demand
    RECONNECTING = "reconnecting"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(slots=True)
class BaselineProgress:
    """Rows of the running baseline (all tables of it), for logs, metrics and status."""

    table: str = ""
    rows: int = 0
    expected_rows: int = 0  # the planner's estimate (pg_class.reltuples), 0 = unknown
    started_monotonic: float = 0.0
    running: bool = False

    @property
    def rows_per_second(self) -> float:
        elapsed = time.monotonic() - self.started_monotonic if self.started_monotonic else 0.0
        return self.rows / elapsed if elapsed > 0 else 0.0

    @property
    def eta_seconds(self) -> float:
        """Seconds left at the current rate; 0 when unknown or done."""
        rate, left = self.rows_per_second, self.expected_rows - self.rows
        return left / rate if rate > 0 and left > 0 else 0.0


@dataclass(slots=True)
class RateMeter:
    """Changes per second over the last window, from a monotonically growing counter."""

    window: float = 10.0
    _samples: list[tuple[float, int]] = field(default_factory=list)

    def rate(self, counter: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        self._samples.append((now, counter))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.pop(0)
        first_time, first_count = self._samples[0]
        return (counter - first_count) / (now - first_time) if now > first_time else 0.0


@dataclass(slots=True)
class IngestStatus:
    phase: IngestPhase = IngestPhase.STARTING
    confirmed_lsn: int = 0  # last LSN sent to PostgreSQL as flushed
    received_lsn: int = 0  # how far the server has sent WAL (keepalive wal_end or a commit's end)
    server_lsn: int = 0  # pg_current_wal_lsn() at the last slot check
    published_messages: int = 0  # acknowledged by JetStream
    transactions: int = 0
    changes: int = 0  # row changes published (streamed, not baseline)
    deadlettered: int = 0  # row changes published to a dead-letter subject
    last_batch_changes: int = 0
    batches: int = 0  # transaction messages published
    batch_changes_max: int = 0  # the largest since the last metrics collection
    lag_seconds: float = 0.0  # receive time minus commit time of the newest transaction received
    baseline_rows: int = 0
    baseline: BaselineProgress = field(default_factory=BaselineProgress)
    baseline_complete: bool = False
    baseline_id: str = ""
    slot_wal_status: str = ""  # reserved, extended, unreserved, lost; "" = not checked yet
    slot_safe_wal_size: int | None = None
    spooled_bytes: int = 0  # streamed in-progress transactions held until commit
    streamed_transactions: int = 0  # committed transactions the server streamed while in progress
    aborted_streamed_transactions: int = 0
    keyless_tables: tuple[str, ...] = ()
    #: Configured tables ingest does not publish (keeps out of the publication), with the reason and the fix.
    refused_tables: dict[str, str] = field(default_factory=dict)
    #: Changes (and baseline rows) too large for one NATS message: dead-lettered, not published.
    oversized_changes: int = 0
    last_oversized: str = ""
    #: Inactive replication slots of the server holding more WAL than the warning threshold: name -> bytes.
    inactive_slots: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    last_error: str = ""
    is_leader: bool = True
    #: Each table's last baseline and why it was taken ("schema.table" -> record).
    baselines: dict[str, TableBaseline] = field(default_factory=dict)
    paused_since: float = 0.0  # unix time an operator's pause took effect; 0 = not paused
    #: Unix time the server's WAL was first seen beyond what was read while paused; 0 = none seen waiting.
    wal_waiting_since: float = 0.0
    _rate: RateMeter = field(default_factory=RateMeter)
    #: Called by changed(): the status heartbeat's poke, so watchers see each transition at once.
    on_change: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def changed(self) -> None:
        """The phase, the baseline or leadership just changed: report it now (never blocks)."""
        if self.on_change is not None:
            self.on_change()

    @property
    def ready(self) -> bool:
        """Moving changes from the source to the stream: streaming with a complete baseline. Paused is not
        ready: it holds its position on purpose and moves nothing (the report says `paused`)."""
        return self.phase is IngestPhase.STREAMING and self.baseline_complete

    def positioned_at(self, lsn: int) -> None:
        """The slot stands at `lsn` (resumed there, or a baseline's consistent point): everything before it is
        confirmed and read, so the positions reported are real ones before the first change arrives."""
        self.confirmed_lsn = self.received_lsn = lsn

    def set_paused(self, paused: bool, now: float | None = None) -> None:
        """The session reads the slot again, or stops reading it on an operator's request (since `now`)."""
        if not paused:
            self.paused_since = self.wal_waiting_since = 0.0
        elif not self.paused_since:
            self.paused_since = time.time() if now is None else now
        self.phase = IngestPhase.PAUSED if paused else IngestPhase.STREAMING

    def observe_server_wal(self, lsn: int, now: float | None = None) -> None:
        """pg_current_wal_lsn() read now; while paused, WAL beyond what was read is waiting from then on."""
        self.server_lsn = lsn
        if self.paused_since and not self.wal_waiting_since and lsn > self.received_lsn:
            self.wal_waiting_since = time.time() if now is None else now

    def current_lag_seconds(self, now: float | None = None) -> float:
        """The lag of the newest transaction read; while paused with WAL waiting, at least how long it has
        been seen waiting (its commit is older than that), so a pause never reads as caught up."""
        if not self.wal_waiting_since:
            return self.lag_seconds
        now = time.time() if now is None else now
        return max(self.lag_seconds, now - self.wal_waiting_since)

    def record_baseline(self, tables: Iterable[str], reason: BaselineReason, baseline_id: str) -> None:
        """A baseline of these tables starts, for this reason."""
        names, started = tuple(tables), int(time.time() * 1000)
        self.baselines.update({t: TableBaseline(t, reason.cause, reason.detail, baseline_id, started) for t in names})
        log.info("baseline %s of %s: %s", baseline_id, ", ".join(names), reason)

    @property
    def lag_bytes(self) -> int:
        """WAL the slot has not confirmed yet: from the server's current position when known."""
        head = max(self.server_lsn, self.received_lsn)
        return max(0, head - self.confirmed_lsn) if self.confirmed_lsn else 0

    def record_oversized(self, letter: OutboundBatch) -> None:
        """A change could not be published (too large for max_payload): count it and say so."""
        self.oversized_changes += 1
        self.last_oversized = letter.dead_letter_reason
        log.error("%s", letter.dead_letter_reason)

    def _take_batch_max(self) -> int:
        value, self.batch_changes_max = self.batch_changes_max, 0
        return value

    def changes_per_second(self) -> float:
        return self._rate.rate(self.changes)

    def gauges(self) -> dict[str, float]:
        """Current values for metrics (names without the laredo.ingest. prefix)."""
        baseline = self.baseline
        return {
            "lag_bytes": float(self.lag_bytes), "lag_seconds": self.current_lag_seconds(),
            "changes_total": float(self.changes), "changes_per_second": self.changes_per_second(),
            "transactions_total": float(self.transactions), "messages_acked_total": float(self.published_messages),
            "deadlettered_total": float(self.deadlettered), "last_batch_changes": float(self.last_batch_changes),
            "batches_total": float(self.batches), "batch_changes_max": float(self._take_batch_max()),
            "batch_changes_mean": self.changes / self.batches if self.batches else 0.0,
            "confirmed_lsn": float(self.confirmed_lsn), "spooled_bytes": float(self.spooled_bytes),
            "slot_lost": 1.0 if self.slot_wal_status in ("lost", "missing") else 0.0,
            "slot_unreserved": 1.0 if self.slot_wal_status == "unreserved" else 0.0,
            "slot_safe_wal_bytes": float(self.slot_safe_wal_size or 0),
            "streaming": 1.0 if self.phase is IngestPhase.STREAMING else 0.0,
            "paused": 1.0 if self.phase is IngestPhase.PAUSED else 0.0,
            "leader": 1.0 if self.is_leader else 0.0, "restarts_total": float(self.restarts),
            "baseline_rows": float(baseline.rows), "baseline_rows_per_second": baseline.rows_per_second,
            "baseline_eta_seconds": baseline.eta_seconds, "baseline_running": 1.0 if baseline.running else 0.0,
            "refused_tables": float(len(self.refused_tables)), "oversized_changes_total": float(self.oversized_changes),
            "inactive_slots_over_wal_threshold": float(len(self.inactive_slots)),
            "inactive_slot_retained_wal_bytes": float(max(self.inactive_slots.values(), default=0)),
        }

    def report(self) -> dict[str, Any]:
        """A JSON-compatible summary: the status heartbeat and the readiness body."""
        baseline = self.baseline
        return {
            "phase": self.phase.value, "leader": self.is_leader,
            # "" until the slot's position is known (before the first resume or baseline), never a made-up 0/0
            "confirmed_lsn": _lsn_text(self.confirmed_lsn), "received_lsn": _lsn_text(self.received_lsn),
            "lag_bytes": self.lag_bytes, "lag_seconds": round(self.current_lag_seconds(), 3),
            "paused": self.phase is IngestPhase.PAUSED, **self._paused_report(),
            "changes": self.changes, "changes_per_second": round(self.changes_per_second(), 1),
            "transactions": self.transactions, "published_messages": self.published_messages,
            "deadlettered": self.deadlettered, "slot_wal_status": self.slot_wal_status,
            "spooled_bytes": self.spooled_bytes, "streamed_transactions": self.streamed_transactions,
            "baseline_complete": self.baseline_complete,
            "baseline_id": self.baseline_id,
            "baselines": {table: record.report() for table, record in sorted(self.baselines.items())},
            "baseline": {"running": baseline.running, "table": baseline.table, "rows": baseline.rows,
                         "expected_rows": baseline.expected_rows,
                         "rows_per_second": round(baseline.rows_per_second, 1),
                         "eta_seconds": round(baseline.eta_seconds, 1)},
            "keyless_tables": list(self.keyless_tables), "restarts": self.restarts,
            "refused_tables": dict(self.refused_tables), "oversized_changes": self.oversized_changes,
            **({"last_oversized": self.last_oversized} if self.last_oversized else {}),
            "inactive_slots_over_wal_threshold": [{"slot": name, "retained_wal_bytes": size}
                                                  for name, size in sorted(self.inactive_slots.items())],
            **({"last_error": self.last_error} if self.last_error else {}),
        }

    def _paused_report(self) -> dict[str, Any]:
        if not self.paused_since:
            return {}
        waiting = {"wal_waiting_since_unix_ms": int(self.wal_waiting_since * 1000)} if self.wal_waiting_since else {}
        return {"paused_since_unix_ms": int(self.paused_since * 1000), **waiting}


def _lsn_text(lsn: int) -> str:
    return format_lsn(lsn) if lsn else ""
