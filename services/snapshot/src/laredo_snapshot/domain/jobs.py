"""Value types of a compaction: the configured table, one job, the stream's bounds and the result."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.format import FORMAT, SnapshotManifest, SnapshotPart

PRODUCER = "laredo-snapshot"


@dataclass(frozen=True, slots=True)
class TableJob:
    """One table the service compacts, with its fan-out target's snapshot store, retention, part size and format."""

    source_id: str
    table: TableId
    store: StoreConfig
    keep_count: int = 5  # 0 = no count limit
    max_age: float = 0.0  # seconds; 0 = no age limit
    part_rows: int = 100_000
    format: str = FORMAT  # of the parts written: jsonl | parquet (the base may have either)


@dataclass(frozen=True, slots=True)
class TailBounds:
    """The stream as it was when a compaction started.

    first_sequence/last_sequence: the oldest and newest message the stream holds (any subject; an empty
    stream: last_sequence + 1 and its last sequence, 0 when never written);
    table_last_sequence: the newest message of the table's subject (0: none).
    """

    stream: str
    first_sequence: int
    last_sequence: int
    table_last_sequence: int


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """Fold `base` (None: start from nothing) and the table's messages after_sequence < seq <= end_sequence
    into the parts of snapshot `snapshot_id` in `store`. gap: the messages between the base and
    after_sequence are gone (the tail must then rebuild the table by itself)."""

    table: TableId
    source_id: str
    store: StoreConfig
    snapshot_id: str
    base: SnapshotManifest | None
    after_sequence: int
    end_sequence: int
    stream: str = ""
    gap: bool = False
    part_rows: int = 100_000
    format: str = FORMAT


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """Wall-clock seconds of each phase."""

    read_tail: float = 0.0
    fold: float = 0.0
    write: float = 0.0
    checksum: float = 0.0


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a compactor wrote (every part; the manifest is the caller's) and where the rows stand."""

    columns: tuple[ColumnInfo, ...]
    key_columns: tuple[str, ...]
    row_count: int
    source_position: str
    stream_sequence: int
    parts: tuple[SnapshotPart, ...]
    checksum: str
    messages: int = 0  # tail messages folded
    changes: int = 0  # changes they carried
    engine: str = "spark"  # spark | sequential
    sequential_reason: str = ""
    times: PhaseTimes = field(default_factory=PhaseTimes)


def snapshot_id_for(created_at: float, stream_sequence: int, nonce: str) -> str:
    """`<UTC time YYYYMMDDTHHMMSSmmm>Z-s<stream sequence at the start>-<nonce>`: sorts by creation time like
    fan-out's ids and tells them apart (fan-out puts its journal sequence where this puts `s` and the stream's)."""
    stamp = dt.datetime.fromtimestamp(created_at, dt.timezone.utc)
    return f"{stamp:%Y%m%dT%H%M%S}{stamp.microsecond // 1000:03d}Z-s{stream_sequence}-{nonce}"


def manifest_for(job: CompactionJob, result: CompactionResult, created_at: float,
                 user_meta: dict[str, object] | None = None) -> SnapshotManifest:
    return SnapshotManifest(
        snapshot_id=job.snapshot_id, table=job.table, columns=result.columns, key_columns=result.key_columns,
        row_count=result.row_count, source_position=result.source_position, stream_sequence=result.stream_sequence,
        journal_sequence=0, created_at=created_at, parts=result.parts, checksum=result.checksum,
        source_id=job.source_id, producer=PRODUCER, format=job.format, user_meta=dict(user_meta or {}))
