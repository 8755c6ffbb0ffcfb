"""Compaction passes over the configured tables: once (cron, CI), every interval, and on request (commands).

One pass at a time (a lock): the timer and a command never compact concurrently. A table whose compaction
fails with a known error (store or stream unavailable, damaged data, a gap in the stream) is logged and
reported in the status; the pass goes on with the next table and the next pass tries it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId
from laredo_kernel.errors import LaredoError
from laredo_core.snapshots.format import SnapshotManifest

from laredo_snapshot.application.compaction import CompactionOutcome, TableCompaction
from laredo_snapshot.application.phases import PhaseTracker
from laredo_snapshot.domain.errors import UnknownTable
from laredo_snapshot.ports import Clock, Observer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TableRun:
    """How one table's last compaction ended: outcome set, or error set."""

    table: TableId
    outcome: CompactionOutcome | None = None
    error: str = ""
    finished_at: float = 0.0

    @property
    def manifest(self) -> SnapshotManifest | None:
        return self.outcome.manifest if self.outcome is not None else None

    @property
    def snapshot_id(self) -> str:
        return self.manifest.snapshot_id if self.manifest is not None else ""

    @property
    def reason(self) -> str:
        """Why no snapshot was written ("" when one was, or when the compaction failed)."""
        return self.outcome.reason if self.outcome is not None else ""

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"finished_unix_ms": int(self.finished_at * 1000)}
        manifest = self.manifest
        if self.error:
            status["error"] = self.error
        elif manifest is None or self.outcome is None:
            status["skipped"] = self.reason
        else:
            status.update(snapshot_id=manifest.snapshot_id, rows=manifest.row_count,
                          source_position=manifest.source_position, stream_sequence=manifest.stream_sequence,
                          seconds=round(self.outcome.seconds, 3))
        return status


class SnapshotService:
    def __init__(self, compactions: Sequence[TableCompaction], clock: Clock, observer: Observer, *,
                 interval: float, phases: PhaseTracker | None = None) -> None:
        self._compactions = {c.job.table: c for c in compactions}
        self._clock = clock
        self._observer = observer
        self.interval = interval
        self._lock = asyncio.Lock()
        self.running: TableId | None = None
        self.running_since = 0.0  # clock time the running compaction started
        self._phases = phases  # the running compaction's phase (the observer the compactors report to)
        self.last: dict[TableId, TableRun] = {}
        self.passes = 0

    @property
    def tables(self) -> list[TableId]:
        return list(self._compactions)

    def resolve(self, names: Sequence[str]) -> list[TableId]:
        """Tables by `schema.table` name (all of them for none); UnknownTable for one not compacted here."""
        if not names:
            return self.tables
        known = {str(t): t for t in self._compactions}
        missing = [n for n in names if n not in known]
        if missing:
            raise UnknownTable(missing[0], sorted(known))
        return [known[n] for n in dict.fromkeys(names)]

    async def run_pass(self, tables: Sequence[TableId] | None = None,
                       user_meta: Mapping[str, Any] | None = None) -> list[TableRun]:
        """Compact `tables` (all when None) one after another; returns how each ended."""
        async with self._lock:
            runs = [await self._run_table(t, user_meta) for t in (tables if tables is not None else self.tables)]
            self.passes += 1
            return runs

    async def _run_table(self, table: TableId, user_meta: Mapping[str, Any] | None) -> TableRun:
        self.running, self.running_since = table, self._clock.now()
        if self._phases is not None:
            self._phases.reset()
        try:
            outcome = await self._compactions[table].run(user_meta)
            run = TableRun(table, outcome, finished_at=self._clock.now())
        except LaredoError as exc:
            log.error("%s: compaction failed: %s", table, exc)
            self._observer.record("failures", 1, {"table": str(table)})
            run = TableRun(table, error=f"{type(exc).__name__}: {exc}", finished_at=self._clock.now())
        finally:
            self.running = None
        self.last[table] = run
        return run

    async def run_every_interval(self, *, first_now: bool = True) -> None:
        """A pass every `interval` seconds (the first at once when first_now) until cancelled."""
        if not first_now:
            await asyncio.sleep(self.interval)  # a schedule, not a hot path
        while True:
            await self.run_pass()
            await asyncio.sleep(self.interval)

    def status(self) -> dict[str, Any]:
        """For the heartbeat and /health/ready: per table, how its last compaction ended."""
        return {
            "ready": True,
            "compacting": str(self.running) if self.running is not None else "",
            "compacting_since_unix_ms": int(self.running_since * 1000) if self.running is not None else 0,
            **(self._phases.report() if self._phases is not None and self.running is not None else {}),
            "passes": self.passes,
            "interval_seconds": self.interval,
            "tables": {str(t): (self.last[t].to_status() if t in self.last else {}) for t in self._compactions},
        }

