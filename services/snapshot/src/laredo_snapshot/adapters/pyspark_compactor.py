"""The Compactor port on PySpark: the tail read in parallel ranges, grouped by key, folded per key, written per task.

Steps (each a Spark job; the driver only sees summaries and part metadata, never rows):
1. read tail: the stream sequences (after, end] are split into one range per partition; each task reads its
   range of the table's subject (its own JetStream consumer), decodes the messages and emits their records
   plus one summary per message; the records stay cached for step 2;
2. plan (driver): the summaries give the plan (replays, TRUNCATE and baseline resets, the cut, columns);
   a tail the key-by-key fold cannot do exactly goes to the sequential compactor instead;
3. fold and write: rows that are the only record of their key (domain/direct.py: base rows no tail record
   touches, or the rows of the tail's last baseline generation nothing else touches) are written as they are
   by the tasks that read them; the other records, and the base rows (one task per part, each checked against
   its manifest entry) unless a reset makes them irrelevant, are grouped by key into partitions of about
   `part_rows` rows, and each task folds its keys and writes its rows; parts of at most `part_rows` rows go
   straight from the worker to the store (minio SDK or local file: no Hadoop S3 connector is needed);
4. checksum (driver): the parts are read back in order, checked against what the tasks reported, and hashed
   into the manifest's checksum (SHA-256 over all parts in order cannot be computed from per-part hashes).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from pyspark import StorageLevel
from pyspark.rdd import RDD

from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotStoreUnavailable
from laredo_core.snapshots.format import Checksum, SnapshotManifest, SnapshotPart, encode_part, verify_part

from laredo_snapshot.adapters import spark_tasks
from laredo_snapshot.adapters.spark_session import SparkSessions
from laredo_snapshot.adapters.spark_tasks import BaseSpec, PartWritten, TailOpener, TargetSpec
from laredo_snapshot.domain.direct import (
    DIRECT_MIN_ROWS,
    DirectKind,
    DirectRows,
    direct_rows,
    generation_candidate,
)
from laredo_snapshot.domain.errors import CompactionFailed, StreamUnavailable, TailGap
from laredo_snapshot.domain.jobs import CompactionJob, CompactionResult, PhaseTimes
from laredo_snapshot.domain.key_fold import KeyFoldPlan
from laredo_snapshot.domain.plan import FoldPlan, FoldStart, make_plan
from laredo_snapshot.domain.records import MessageSummary
from laredo_snapshot.ports import Compactor, Observer, SnapshotStore

log = logging.getLogger(__name__)

#: Errors raised inside tasks reach the driver as text; these are raised again under their own type (a base
#: part missing from the store makes the base unusable, as a damaged one does).
_TASK_ERRORS: dict[str, type[Exception]] = {
    "SnapshotCorrupt": SnapshotCorrupt, "SnapshotNotFound": SnapshotCorrupt,
    "SnapshotStoreUnavailable": SnapshotStoreUnavailable, "TailUnavailable": StreamUnavailable,
    "CompactionFailed": CompactionFailed,
}
_TASK_ERROR = re.compile(r"\b(?:\w+\.)*(" + "|".join(_TASK_ERRORS) + r"): (.*)")


class PysparkCompactor:
    """partitions: tasks for reading the tail and the least number of parts (0 = Spark's default parallelism).
    sequential: the compactor for tails the key-by-key fold cannot do exactly. direct_min_rows: the fewest
    rows worth the direct path (domain/direct.py)."""

    def __init__(self, sessions: SparkSessions, tail: TailOpener, store_for: Callable[[StoreConfig], SnapshotStore],
                 sequential: Compactor, observer: Observer, *, partitions: int = 0,
                 direct_min_rows: int = DIRECT_MIN_ROWS) -> None:
        self._sessions = sessions
        self._tail = tail
        self._store_for = store_for
        self._sequential = sequential
        self._observer = observer
        self._partitions = partitions
        self._direct_min_rows = direct_min_rows
        self._lock = asyncio.Lock()

    async def compact(self, job: CompactionJob) -> CompactionResult | None:
        async with self._lock:
            return await self._compact(job)

    async def _compact(self, job: CompactionJob) -> CompactionResult | None:
        table = str(job.table)
        start = FoldStart.of(job.base)
        started = time.perf_counter()
        with self._observer.phase("snapshot.read_tail", {"laredo.table": table}) as span:
            tail, summaries = await asyncio.to_thread(self._read_tail, job)
            span.set("laredo.snapshot.messages", len(summaries))
        read_seconds = time.perf_counter() - started
        try:
            plan = make_plan(start, summaries)
            log.info("%s: read %d messages (%d changes) in %.1fs; folding up to stream sequence %d%s", table,
                     len(summaries), sum(s.changes for s in summaries), read_seconds, plan.last_sequence,
                     f" after {len(plan.resets)} reset(s)" if plan.resets else "")
            if not plan.advances(start):
                return None
            if job.gap and not plan.resets:
                raise TailGap(job.table, job.stream, start.stream_sequence, job.after_sequence + 1)
            if plan.sequential_reason:
                log.warning("%s: folding this tail key by key would not be exact (%s); folding it in order instead",
                            table, plan.sequential_reason)
                result = await self._sequential.compact(job)
                return replace(result, sequential_reason=plan.sequential_reason) if result is not None else None
            started = time.perf_counter()
            with self._observer.phase("snapshot.fold", {"laredo.table": table}) as span:
                written = await asyncio.to_thread(self._fold_and_write, job, tail, plan, summaries)
                if not written:  # an empty table: one empty part, as fan-out writes
                    written = [await self._empty_part(job, plan)]
                span.set("laredo.snapshot.parts", len(written))
        finally:
            await asyncio.to_thread(tail.unpersist)
        fold_write = time.perf_counter() - started
        started = time.perf_counter()
        with self._observer.phase("snapshot.checksum", {"laredo.table": table}):
            checksum = await self._checksum(job, [w.part for w in written])
        return self._result(plan, written, checksum, read_seconds, fold_write, time.perf_counter() - started)

    def _read_tail(self, job: CompactionJob) -> tuple[RDD[Any], list[MessageSummary]]:
        context = self._sessions.get().sparkContext
        ranges = split_ranges(job.after_sequence, job.end_sequence, self._partitions or context.defaultParallelism)
        read = partial(spark_tasks.read_tail, self._tail, job.source_id, job.table)
        tail = context.parallelize(ranges, len(ranges)).mapPartitions(read).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            summaries = _run(lambda: tail.filter(lambda kv: kv[0] is None).map(lambda kv: kv[1]).collect())
        except BaseException:
            tail.unpersist()
            raise
        return tail, summaries

    def _fold_and_write(self, job: CompactionJob, tail: RDD[Any], plan: FoldPlan,
                        summaries: list[MessageSummary]) -> list[PartWritten]:
        """Direct rows written as they are, every other record grouped by key and folded; the parts written."""
        context = self._sessions.get().sparkContext
        parallelism = self._partitions or context.defaultParallelism
        records = tail.filter(lambda kv: kv[0] is not None)
        target = TargetSpec(job.store, job.table, job.snapshot_id, job.part_rows, job.format, plan.columns)
        base = job.base if job.base is not None and plan.base_needed else None
        direct = direct_rows(plan, base.row_count if base is not None else None, summaries,
                             min_rows=self._direct_min_rows)
        key_plan = context.broadcast(KeyFoldPlan.of(plan))
        plan_of: Callable[[], KeyFoldPlan] = lambda: key_plan.value  # noqa: E731 - shipped to the tasks
        cleanup: list[Any] = [key_plan]  # broadcasts and cached RDDs of this compaction
        written: list[PartWritten] = []
        try:
            if direct.kind is DirectKind.BASE and base is not None:
                grouped, first_task = self._direct_base(context, records, base, target, written, cleanup)
                rows = 2 * plan.changes
            elif direct.kind is DirectKind.GENERATION:
                grouped, first_task = self._direct_generation(context, tail, records, direct, plan_of, target,
                                                              written, cleanup)
                rows = 2 * direct.others
                if not direct.others:  # every record was written directly
                    return sorted(written, key=lambda w: w.index)
            else:
                grouped, first_task, rows = records, 0, plan.changes
                if base is not None:
                    spec = BaseSpec(job.store, job.table, base.snapshot_id, base.key_columns, base.format)
                    parts = context.parallelize(list(base.parts), max(1, len(base.parts)))
                    grouped = grouped.union(parts.mapPartitions(partial(spark_tasks.read_base, spec)))
                    rows += base.row_count
            partitions = max(parallelism, math.ceil(rows / max(1, job.part_rows)))
            fold = partial(spark_tasks.fold_and_write, target, plan_of, first_task)
            written += _run(lambda: grouped.partitionBy(partitions).mapPartitionsWithIndex(fold).collect())
        finally:
            for resource in cleanup:
                if isinstance(resource, RDD):
                    resource.unpersist()
                else:
                    resource.destroy()
        log.info("%s: %s rows written as they are, the rest folded by key in %d partitions", job.table,
                 direct.kind.value, partitions)
        return sorted(written, key=lambda w: w.index)

    def _direct_base(self, context: Any, records: RDD[Any], base: SnapshotManifest, target: TargetSpec,
                     written: list[PartWritten], cleanup: list[Any]) -> tuple[RDD[Any], int]:
        touched = context.broadcast(set(_run(lambda: records.keys().distinct().collect())))
        cleanup.append(touched)
        spec = BaseSpec(target.store, target.table, base.snapshot_id, base.key_columns, base.format)
        read = partial(spark_tasks.direct_base, spec, target, lambda: touched.value)
        out = context.parallelize(list(base.parts), max(1, len(base.parts))).mapPartitionsWithIndex(read)
        out = out.persist(StorageLevel.MEMORY_AND_DISK)
        cleanup.append(out)
        written += _run(lambda: out.filter(lambda kv: kv[0] is None).values().collect())
        return records.union(out.filter(lambda kv: kv[0] is not None)), max(1, len(base.parts))

    def _direct_generation(self, context: Any, tail: RDD[Any], records: RDD[Any], direct: DirectRows,
                           plan_of: Callable[[], KeyFoldPlan], target: TargetSpec, written: list[PartWritten],
                           cleanup: list[Any]) -> tuple[RDD[Any], int]:
        def candidate(value: Any) -> bool:
            return generation_candidate(value, direct, plan_of())

        others = _run(lambda: records.filter(lambda kv: not candidate(kv[1])).keys().distinct().collect())
        touched = context.broadcast(set(others))
        cleanup.append(touched)
        write = partial(spark_tasks.direct_generation, target, direct, plan_of, lambda: touched.value)
        written += _run(lambda: tail.mapPartitionsWithIndex(write).collect())
        grouped = records.filter(lambda kv: not candidate(kv[1]) or kv[0] in touched.value)
        return grouped, tail.getNumPartitions()

    async def _empty_part(self, job: CompactionJob, plan: FoldPlan) -> PartWritten:
        part, data = encode_part(0, [], job.format, plan.columns)
        await self._store_for(job.store).write_part(job.table, job.snapshot_id, part.name, data)
        return PartWritten(0, part, 0.0, 0.0)

    async def _checksum(self, job: CompactionJob, parts: list[SnapshotPart]) -> str:
        store = self._store_for(job.store)
        checksum = Checksum()
        where = f"snapshot {job.snapshot_id} of {job.table} (just written)"
        for part in parts:
            data = await store.read_part(job.table, job.snapshot_id, part.name)
            verify_part(part, data, where)
            checksum.update(data)
        return checksum.value

    @staticmethod
    def _result(plan: FoldPlan, written: list[PartWritten], checksum: str, read_seconds: float, fold_write: float,
                checksum_seconds: float) -> CompactionResult:
        task_fold = sum(w.fold_seconds for w in written)
        task_write = sum(w.write_seconds for w in written)
        share = task_fold / (task_fold + task_write) if task_fold + task_write > 0 else 1.0
        times = PhaseTimes(read_tail=read_seconds, fold=fold_write * share, write=fold_write * (1 - share),
                           checksum=checksum_seconds)
        assert plan.position is not None
        return CompactionResult(
            columns=plan.columns, key_columns=plan.key_columns, row_count=sum(w.part.rows for w in written),
            source_position=str(plan.position), stream_sequence=plan.last_sequence,
            parts=tuple(w.part for w in written), checksum=checksum, messages=plan.messages, changes=plan.changes,
            engine="spark", times=times)


def split_ranges(after: int, end: int, partitions: int) -> list[tuple[int, int]]:
    """(after, end] as at most `partitions` contiguous (after_i, up_to_i] ranges of about equal length."""
    count = max(0, end - after)
    n = max(1, min(partitions, count))
    bounds = [after + (count * i) // n for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(n) if bounds[i + 1] > bounds[i]] or [(after, end)]


def _run(action: Callable[[], Any]) -> Any:
    """Run a Spark action; an error a task raised on purpose comes back under its own type."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - py4j and pyspark wrap task errors in several types
        match = _TASK_ERROR.search(str(exc))
        if match is None:
            raise CompactionFailed(f"the Spark job failed: {_first_lines(exc)}") from exc
        raise _TASK_ERRORS[match.group(1)](match.group(2).strip()) from exc


def _first_lines(exc: BaseException, lines: int = 6) -> str:
    return " | ".join(str(exc).strip().splitlines()[:lines])
