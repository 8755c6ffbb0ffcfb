"""Errors of the snapshot service: one base class, typed subclasses with a retryable flag."""

from __future__ import annotations

from laredo_kernel.changes import TableId
from laredo_kernel.errors import LaredoError


class SnapshotServiceError(LaredoError):
    """Base of the snapshot service's errors."""


class CompactionFailed(SnapshotServiceError):
    """A compaction could not be carried out; nothing visible was written (no manifest)."""


class TailGap(SnapshotServiceError):
    """The stream no longer holds every message after the newest snapshot, and what it holds does not rebuild
    the table by itself (no TRUNCATE and no complete baseline after the gap)."""

    def __init__(self, table: TableId, stream: str, after: int, first: int) -> None:
        super().__init__(
            f"{table}: stream {stream} holds messages only from sequence {first}, but the newest usable snapshot "
            f"ends at sequence {after}; the changes in between are gone and no complete baseline follows them. "
            "Ask ingest for a new baseline of the table (OAM ReloadTable, or `laredo` reload) and run again")
        self.table = table


class StreamUnavailable(SnapshotServiceError):
    """The change stream cannot be read (NATS unreachable, stream missing); the next run tries again."""

    retryable = True


class UnknownTable(SnapshotServiceError):
    """A command or run named a table the snapshot service does not compact."""

    def __init__(self, table: str, known: list[str]) -> None:
        super().__init__(f"table {table!r} is not compacted by this service (it compacts: "
                         f"{', '.join(known) or 'nothing'}); give its replication-fanout target a snapshot section")
