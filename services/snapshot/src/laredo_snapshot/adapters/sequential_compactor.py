"""The Compactor port in one process: the sequential fold over the whole tail (table_fold.TableFold).

Exact for every tail (it applies messages in order, as fan-out does), but bounded by one process's memory and
one core: the Spark compactor hands it the tails its key-by-key fold cannot do exactly, and unit tests and
small deployments use it directly (it needs no JVM).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from laredo_kernel.changes import ColumnInfo
from laredo_core.rebuild.snapshot_rows import read_verified_rows
from laredo_core.rebuild.tail import StreamTail, TailUnavailable
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.format import Checksum, SnapshotPart, encode_part
from laredo_core.stream.feed import FeedMessage

from laredo_snapshot.domain.errors import StreamUnavailable, TailGap
from laredo_snapshot.domain.jobs import CompactionJob, CompactionResult, PhaseTimes
from laredo_snapshot.domain.plan import FoldStart, make_plan
from laredo_snapshot.domain.records import summarize
from laredo_snapshot.domain.table_fold import TableFold
from laredo_snapshot.ports import Observer, SnapshotStore


class SequentialCompactor:
    """tail: a StreamTail with JSON-compatible values; store_for: the store of a StoreConfig."""

    def __init__(self, tail: StreamTail, store_for: Callable[[StoreConfig], SnapshotStore], observer: Observer
                 ) -> None:
        self._tail = tail
        self._store_for = store_for
        self._observer = observer
        self._lock = asyncio.Lock()

    async def compact(self, job: CompactionJob) -> CompactionResult | None:
        async with self._lock:
            return await self._compact(job)

    async def _compact(self, job: CompactionJob) -> CompactionResult | None:
        table, store = str(job.table), self._store_for(job.store)
        start = FoldStart.of(job.base)
        started = time.perf_counter()
        with self._observer.phase("snapshot.read_tail", {"laredo.table": table}):
            messages = await self._read(job)
        read_seconds, started = time.perf_counter() - started, time.perf_counter()
        plan = make_plan(start, [summarize(m.stream_sequence, m.batch) for m in messages])
        if not plan.advances(start):
            return None
        if job.gap and not plan.resets:
            raise TailGap(job.table, job.stream, start.stream_sequence, job.after_sequence + 1)
        with self._observer.phase("snapshot.fold", {"laredo.table": table}):
            fold = TableFold()
            base = job.base
            if base is not None and start.position is not None:
                # After a reset only the base's position and columns matter: its rows are not even read.
                rows = await read_verified_rows(store, base) if plan.base_needed else []
                await asyncio.to_thread(fold.restore, base.columns, base.key_columns, start.position,
                                        base.stream_sequence, rows)
            await asyncio.to_thread(_apply, fold, messages, plan.last_sequence)
        fold_seconds, started = time.perf_counter() - started, time.perf_counter()
        with self._observer.phase("snapshot.write", {"laredo.table": table}):
            rows = fold.row_values()
            parts, checksum = await self._write(job, store, rows, fold.columns)
        write_seconds = time.perf_counter() - started
        return CompactionResult(
            columns=fold.columns, key_columns=fold.key_columns, row_count=len(rows),
            source_position=str(fold.applied_position), stream_sequence=fold.stream_sequence, parts=parts,
            checksum=checksum,
            messages=plan.messages, changes=plan.changes, engine="sequential",
            sequential_reason=plan.sequential_reason,
            times=PhaseTimes(read_tail=read_seconds, fold=fold_seconds, write=write_seconds))

    async def _read(self, job: CompactionJob) -> list[FeedMessage]:
        try:
            return [m async for m in self._tail.read(job.source_id, job.table, job.after_sequence, job.end_sequence)]
        except TailUnavailable as exc:
            raise StreamUnavailable(str(exc)) from exc

    async def _write(self, job: CompactionJob, store: SnapshotStore, rows: list[dict[str, Any]],
                     columns: tuple[ColumnInfo, ...]) -> tuple[tuple[SnapshotPart, ...], str]:
        checksum, parts, step = Checksum(), [], job.part_rows
        for index, offset in enumerate(range(0, max(len(rows), 1), step)):
            part, data = await asyncio.to_thread(encode_part, index, rows[offset:offset + step], job.format, columns)
            checksum.update(data)
            await store.write_part(job.table, job.snapshot_id, part.name, data)
            parts.append(part)
        return tuple(parts), checksum.value


def _apply(fold: TableFold, messages: list[FeedMessage], last_sequence: int) -> None:
    for message in messages:
        if message.stream_sequence > last_sequence:
            break
        fold.apply(message.stream_sequence, message.batch)

