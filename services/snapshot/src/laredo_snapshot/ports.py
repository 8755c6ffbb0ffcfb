"""Ports of the snapshot service: the compactor, the stream's bounds, the snapshot store, clock and observer."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import CoordinationStore
from laredo_core.snapshots.store import SnapshotStore

from laredo_snapshot.domain.jobs import CompactionJob, CompactionResult, TailBounds

__all__ = ["Clock", "Compactor", "CoordinationStore", "Observer", "PhaseSpan", "SnapshotStore", "StreamBounds"]


class Compactor(Protocol):
    """Folds a base snapshot and the table's stream tail into the parts of a new snapshot.

    Contract:
    - compact(job) reads the base snapshot's parts from job.store (checking each part's size and sha256) and
      the table's messages with job.after_sequence < stream sequence <= job.end_sequence, folds them exactly as
      fan-out applies them (laredo_snapshot.domain.table_fold), and writes the parts of job.snapshot_id to
      job.store: never the manifest, which the caller writes last;
    - the rows stop at the last message that leaves the table consistent (not inside a baseline, not between the
      chunks of one transaction); the result says where (source position, stream sequence);
    - it returns None when the tail brings nothing beyond the base (no complete message, or only replays);
      parts may have been written then, and the caller removes them;
    - it raises SnapshotCorrupt or SnapshotNotFound when the base cannot be read (the caller tries an older
      one), TailGap when job.gap and the tail does not rebuild the table by itself (a TRUNCATE or a complete
      baseline), StreamUnavailable when the stream cannot be read, CompactionFailed for anything else;
    - one compaction at a time per compactor; it never blocks the event loop (the work runs elsewhere).
    """

    async def compact(self, job: CompactionJob) -> CompactionResult | None: ...


class StreamBounds(Protocol):
    """Where a table's stream stands now: read at the start of each compaction.

    bounds(source_id, table) returns the stream's first and last sequence and the last sequence of the
    table's subject (0 when it has no message); it raises StreamUnavailable when the stream does not exist
    or cannot be reached. Idempotent, no side effects; safe to call concurrently.
    """

    async def bounds(self, source_id: str, table: TableId) -> TailBounds: ...


class Clock(Protocol):
    """Unix time in seconds (snapshot creation times, retention)."""

    def now(self) -> float: ...


class PhaseSpan(Protocol):
    def set(self, key: str, value: Any) -> None: ...


class Observer(Protocol):
    """Traces and metrics of compactions; never raises into the caller.

    - phase(name, attributes): a span around one phase (`snapshot.compact` around a table's whole compaction,
      `snapshot.read_tail`, `snapshot.fold`, `snapshot.write`, `snapshot.checksum`, `snapshot.manifest`,
      `snapshot.retention` inside it), nested as the calls nest;
    - record(name, value, attributes): one measurement of a histogram (e.g. `rows`, `rows_per_second`,
      `duration_seconds`, `failures`); metric names get the prefix `laredo.snapshot.`.
    """

    def phase(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[PhaseSpan]: ...

    def record(self, name: str, value: float, attributes: Mapping[str, str] | None = None) -> None: ...
