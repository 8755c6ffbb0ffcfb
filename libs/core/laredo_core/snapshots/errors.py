"""Snapshot errors, shared by every service that reads or writes snapshots."""

from __future__ import annotations

from laredo_kernel.errors import ErrorKind, LaredoError


class SnapshotError(LaredoError):
    """Base of the snapshot errors."""


class SnapshotNotFound(SnapshotError):
    """No stored snapshot (or part of one) has the requested id."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, snapshot_id: str) -> None:
        super().__init__(f"snapshot {snapshot_id!r} not found (ListSnapshots shows the retained ones)")
        self.snapshot_id = snapshot_id


class SnapshotCorrupt(SnapshotError):
    """A stored snapshot does not match its manifest or the format (the store holds bad data)."""


class SnapshotStoreUnavailable(SnapshotError):
    """The snapshot store failed or cannot be reached; adapters wrap their library's errors in it."""

    retryable = True
