"""Compact one table: newest usable snapshot + stream tail -> a new snapshot (manifest last), then retention.

Invariants:
- the manifest is written only after every part was written (by the compactor), so a reader never sees a
  half-written snapshot, and a compaction that fails or is killed leaves the previous snapshot the newest;
- a failed compaction removes the parts it wrote (a killed one cannot: they stay invisible, without manifest);
- a damaged newest snapshot is skipped for the next older one, and without any the table is built from the
  stream (its baseline), as fan-out restores; a snapshot of another stream (its sequence lies beyond the
  stream's end: the stream was created again) is skipped the same way;
- the snapshot's creation time is when the compaction started (its rows are the stream as it was then), so
  "newest" orders snapshots by how far they reach, as fan-out's own snapshots do.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_core.snapshots.format import SnapshotManifest, expired

from laredo_snapshot.domain.jobs import CompactionJob, CompactionResult, TableJob, TailBounds, manifest_for
from laredo_snapshot.domain.jobs import snapshot_id_for
from laredo_snapshot.ports import Clock, Compactor, Observer, SnapshotStore, StreamBounds

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """manifest None: nothing new to snapshot (`reason` says why)."""

    manifest: SnapshotManifest | None
    reason: str = ""
    result: CompactionResult | None = None
    seconds: float = 0.0


class TableCompaction:
    def __init__(self, job: TableJob, store: SnapshotStore, bounds: StreamBounds, compactor: Compactor,
                 clock: Clock, observer: Observer) -> None:
        self.job = job
        self._store = store
        self._bounds = bounds
        self._compactor = compactor
        self._clock = clock
        self._observer = observer

    async def run(self, user_meta: Mapping[str, Any] | None = None) -> CompactionOutcome:
        table = self.job.table
        started = self._clock.now()
        with self._observer.phase("snapshot.compact", {"laredo.table": str(table)}) as span:
            outcome = replace(await self._run(started, user_meta), seconds=self._clock.now() - started)
            span.set("laredo.snapshot.written", outcome.manifest is not None)
            if outcome.manifest is None:
                log.info("%s: no new snapshot (%s)", table, outcome.reason)
                return outcome
            span.set("laredo.snapshot.id", outcome.manifest.snapshot_id)
            span.set("laredo.snapshot.rows", outcome.manifest.row_count)
            self._record(outcome.manifest, outcome.result, outcome.seconds)
            await self._apply_retention()
        return outcome

    async def _run(self, started: float, user_meta: Mapping[str, Any] | None) -> CompactionOutcome:
        stream = await self._bounds.bounds(self.job.source_id, self.job.table)
        manifests = await self._store.list_snapshots(self.job.table)
        for base in [*self._usable(manifests, stream), None]:
            after = base.stream_sequence if base is not None else 0
            if stream.table_last_sequence <= after:
                return CompactionOutcome(None, f"no message after stream sequence {after}")
            job = self._job(base, after, stream, started)
            log.info("%s: compacting %s and stream %s messages %d..%d into snapshot %s", self.job.table,
                     f"snapshot {base.snapshot_id} ({base.row_count} rows)" if base is not None else "nothing",
                     stream.stream, job.after_sequence + 1, job.end_sequence, job.snapshot_id)
            try:
                result = await self._compactor.compact(job)
            except (SnapshotCorrupt, SnapshotNotFound) as exc:
                log.error("%s: snapshot %s unusable (%s); compacting from an older one", self.job.table,
                          base.snapshot_id if base is not None else "-", exc)
                await self._remove_parts(job)
                if base is None:
                    raise
                continue
            except BaseException:
                await self._remove_parts(job)
                raise
            if result is None:
                await self._remove_parts(job)
                return CompactionOutcome(None, f"nothing complete after stream sequence {after} yet")
            manifest = manifest_for(job, result, started, dict(user_meta or {}))
            with self._observer.phase("snapshot.manifest", {"laredo.table": str(self.job.table)}):
                await self._store.write_manifest(manifest)
            return CompactionOutcome(manifest, "", result)
        raise AssertionError("unreachable: the loop ends with base None")

    def _usable(self, manifests: list[SnapshotManifest], stream: TailBounds) -> list[SnapshotManifest]:
        usable = []
        for manifest in manifests:
            if manifest.stream_sequence > stream.last_sequence:
                log.error("%s: snapshot %s ends at stream sequence %d, beyond the end of stream %s (%d): it belongs "
                          "to a stream since created again; skipping it (remove it, fan-out cannot restore it)",
                          self.job.table, manifest.snapshot_id, manifest.stream_sequence, stream.stream,
                          stream.last_sequence)
            elif manifest.source_id and manifest.source_id != self.job.source_id:
                log.error("%s: snapshot %s comes from source %r, not %r; skipping it", self.job.table,
                          manifest.snapshot_id, manifest.source_id, self.job.source_id)
            else:
                usable.append(manifest)
        return usable

    def _job(self, base: SnapshotManifest | None, after: int, stream: TailBounds, started: float) -> CompactionJob:
        gap = stream.first_sequence > after + 1
        snapshot_id = snapshot_id_for(started, stream.table_last_sequence, secrets.token_hex(3))
        return CompactionJob(table=self.job.table, source_id=self.job.source_id, store=self.job.store,
                             snapshot_id=snapshot_id, base=base, after_sequence=max(after, stream.first_sequence - 1),
                             end_sequence=stream.table_last_sequence, stream=stream.stream, gap=gap,
                             part_rows=self.job.part_rows, format=self.job.format)

    async def _remove_parts(self, job: CompactionJob) -> None:
        try:
            await self._store.delete_snapshot(job.table, job.snapshot_id)
        except SnapshotStoreUnavailable as exc:
            log.warning("%s: could not remove the parts of unfinished snapshot %s (%s); they stay invisible",
                        job.table, job.snapshot_id, exc)

    async def _apply_retention(self) -> None:
        job = self.job
        with self._observer.phase("snapshot.retention", {"laredo.table": str(job.table)}):
            manifests = await self._store.list_snapshots(job.table)
            for manifest in expired(manifests, self._clock.now(), job.keep_count, job.max_age):
                await self._store.delete_snapshot(job.table, manifest.snapshot_id)
                log.info("%s: snapshot %s removed by retention", job.table, manifest.snapshot_id)

    def _record(self, manifest: SnapshotManifest, result: CompactionResult | None, seconds: float) -> None:
        table = str(self.job.table)
        attributes = {"table": table, "engine": result.engine if result is not None else ""}
        self._observer.record("rows", manifest.row_count, attributes)
        self._observer.record("duration_seconds", seconds, attributes)
        if seconds > 0:
            self._observer.record("rows_per_second", manifest.row_count / seconds, attributes)
        times = result.times if result is not None else None
        log.info("%s: snapshot %s written: %d rows at %s (stream sequence %d), %d parts, %d bytes, %.2fs%s",
                 table, manifest.snapshot_id, manifest.row_count, manifest.source_position, manifest.stream_sequence,
                 len(manifest.parts), manifest.size_bytes, seconds,
                 "" if times is None else (f" (read tail {times.read_tail:.2f}s, fold {times.fold:.2f}s, "
                                           f"write {times.write:.2f}s, checksum {times.checksum:.2f}s)"))
