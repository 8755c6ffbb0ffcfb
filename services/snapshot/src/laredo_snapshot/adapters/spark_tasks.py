"""What the Spark compaction runs inside its tasks (Python workers): read the tail, read the base, fold, write.

Every function here runs in a worker process, possibly on another machine: it gets only picklable
configuration (how to open the stream tail and the snapshot store), opens its own connections and closes
them before it returns. Blocking by design: a task has no event loop of its own, so the async store and
tail adapters run on a private one (`_Loop`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.rebuild.tail import StreamTail
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.factory import build_snapshot_store
from laredo_core.snapshots.format import FORMAT, SnapshotPart, decode_part, encode_part, part_of, verify_part
from laredo_core.stream.nats_tail import NatsStreamTail

from laredo_snapshot.domain.direct import DirectRows, generation_candidate
from laredo_snapshot.domain.key_fold import KeyFoldPlan, fold_key
from laredo_snapshot.domain.records import ROW, Record, RecordValue, records_of, row_json, snapshot_record

T = TypeVar("T")
CLIENT_NAME = "laredo-snapshot"
#: Part names of task i start at i * PARTS_PER_TASK (a task may write several parts of part_rows rows); the
#: manifest lists the parts in index order, and readers read them in that order.
PARTS_PER_TASK = 1000


class TailOpener(Protocol):
    """Picklable: opens a StreamTail (JSON-compatible values) inside a task."""

    def __call__(self) -> StreamTail: ...


@dataclass(frozen=True, slots=True)
class NatsTailOpener:
    urls: tuple[str, ...]
    subject_prefix: str
    fetch_batch: int = 512

    def __call__(self) -> StreamTail:
        return NatsStreamTail(self.urls, self.subject_prefix, json_values=True, client_name=CLIENT_NAME,
                              batch=self.fetch_batch)


@dataclass(frozen=True, slots=True)
class BaseSpec:
    """The base snapshot, for the tasks that read it."""

    store: StoreConfig
    table: TableId
    snapshot_id: str
    key_columns: tuple[str, ...]
    format: str = FORMAT


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """The snapshot being written, for the tasks that write its parts (columns: the manifest's, which type
    Parquet parts)."""

    store: StoreConfig
    table: TableId
    snapshot_id: str
    part_rows: int
    format: str = FORMAT
    columns: tuple[ColumnInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class PartWritten:
    """What one task wrote: its part, and the seconds it spent folding and writing."""

    index: int
    part: SnapshotPart
    fold_seconds: float
    write_seconds: float


class _Loop:
    """A private event loop for the async adapters inside a (thread-less, loop-less) task."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()

    def run(self, awaitable: Any) -> Any:
        return self._loop.run_until_complete(awaitable)

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self._loop.run_until_complete(agen.__anext__())  # type: ignore[arg-type]
                except StopAsyncIteration:
                    return
        finally:
            self._loop.run_until_complete(agen.aclose())  # type: ignore[attr-defined]

    def close(self) -> None:
        self._loop.close()


def read_tail(opener: TailOpener, source_id: str, table: TableId,
              ranges: Iterable[tuple[int, int]]) -> Iterator[tuple[Any, Any]]:
    """The records of the table's messages in each (after, up_to] range, then (None, summary) per message."""
    with closing(_Loop()) as loop:
        tail = opener()
        try:
            for after, up_to in ranges:
                for message in loop.iterate(tail.read(source_id, table, after, up_to)):
                    records, summary = records_of(message.stream_sequence, message.batch)
                    yield from records
                    yield None, summary
        finally:
            loop.run(tail.aclose())


def write_parts(target: TargetSpec, first_index: int, lines: Iterable[str], started: float) -> Iterator[PartWritten]:
    """Write `lines` as parts of at most part_rows rows, named from first_index on; fold time is what passed
    between `started` and each write (producing the lines), write time the writing itself."""
    opened, remaining = build_snapshot_store(target.store), iter(lines)
    with closing(_Loop()) as loop:
        chunks = iter(lambda: list(itertools.islice(remaining, target.part_rows)), [])
        for index, chunk in enumerate(chunks, start=first_index):
            produced = time.perf_counter()
            part, data = _encode(target, index, chunk)
            loop.run(opened.write_part(target.table, target.snapshot_id, part.name, data))
            written = time.perf_counter()
            yield PartWritten(index, part, produced - started, written - produced)
            started = written


def _encode(target: TargetSpec, index: int, lines: list[str]) -> tuple[SnapshotPart, bytes]:
    """Part `index` of the target holding `lines` (JSON lines are written as they are)."""
    if target.format == FORMAT:
        data = ("\n".join(lines) + "\n").encode("utf-8")
        return part_of(index, len(lines), data), data
    return encode_part(index, [json.loads(line) for line in lines], target.format, target.columns)


def _base_lines(base: BaseSpec, parts: Iterable[SnapshotPart]) -> Iterator[str]:
    """The rows of the base snapshot's parts as JSON lines, each part checked against its manifest entry."""
    opened = build_snapshot_store(base.store)
    table, snapshot_id = base.table, base.snapshot_id
    where = f"snapshot {snapshot_id} of {table}"
    with closing(_Loop()) as loop:
        for part in parts:
            data = loop.run(opened.read_part(table, snapshot_id, part.name))
            verify_part(part, data, where)
            lines = _part_lines(base.format, part, data, where)
            if len(lines) != part.rows:
                raise SnapshotCorrupt(f"{where}: {part.name} holds {len(lines)} rows, its manifest entry says "
                                      f"{part.rows}")
            yield from lines


def _part_lines(fmt: str, part: SnapshotPart, data: bytes, where: str) -> list[str]:
    """One part's rows as JSON lines (a JSON-lines part as it is: no re-encoding)."""
    if fmt != FORMAT:
        return [row_json(row) for row in decode_part(fmt, data, where)]
    lines = data.decode("utf-8").split("\n")
    if lines[-1]:
        raise SnapshotCorrupt(f"{where}: {part.name} does not end with a newline")
    return lines[:-1]


def read_base(base: BaseSpec, parts: Iterable[SnapshotPart]) -> Iterator[Record]:
    """The rows of the base snapshot's parts as records; SnapshotCorrupt when a part does not match."""
    for line in _base_lines(base, parts):
        yield snapshot_record(line, base.key_columns)


def direct_base(base: BaseSpec, target: TargetSpec, touched: Callable[[], set[Any]], index: int,
                parts: Iterable[SnapshotPart]) -> Iterator[tuple[Any, Any]]:
    """Base rows no tail record touches are written as they are (parts from index * PARTS_PER_TASK); the
    others come out as records to fold, then (None, PartWritten) for each part written."""
    keys, folded = touched(), []

    def untouched() -> Iterator[str]:
        for line in _base_lines(base, parts):
            key, value = snapshot_record(line, base.key_columns)
            if key in keys:
                folded.append((key, value))
            else:
                yield line

    written = list(write_parts(target, index * PARTS_PER_TASK, untouched(), time.perf_counter()))
    yield from folded
    for part in written:
        yield None, part


def direct_generation(target: TargetSpec, direct: DirectRows, plan: Callable[[], KeyFoldPlan],
                      touched: Callable[[], set[Any]], index: int, records: Iterable[tuple[Any, Any]]
                      ) -> Iterator[PartWritten]:
    """The last baseline generation's rows no other record touches, written as they are."""
    key_plan, keys = plan(), touched()
    lines = (value[ROW] for key, value in records
             if key is not None and generation_candidate(value, direct, key_plan) and key not in keys)
    yield from write_parts(target, index * PARTS_PER_TASK, lines, time.perf_counter())


def fold_and_write(target: TargetSpec, plan: Callable[[], KeyFoldPlan], first_task: int, index: int,
                   records: Iterable[tuple[Any, RecordValue]]) -> Iterator[PartWritten]:
    """Fold every key of this task's partition (records arrive in any order) and write the rows."""
    started = time.perf_counter()
    key_plan = plan()
    groups: defaultdict[Any, list[RecordValue]] = defaultdict(list)
    for key, value in records:
        groups[key].append(value)
    lines = (row_json(row) for row in (fold_key(values, key_plan) for values in groups.values()) if row is not None)
    yield from write_parts(target, (first_task + index) * PARTS_PER_TASK, lines, started)
