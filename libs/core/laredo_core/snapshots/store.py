"""The SnapshotStore port: where snapshots are kept (local directory, S3/MinIO, memory)."""

from __future__ import annotations

from typing import Protocol

from laredo_kernel.changes import TableId
from laredo_core.snapshots.format import SnapshotManifest


class SnapshotStore(Protocol):
    """Where snapshots are kept: a local directory, an S3 bucket (MinIO), or memory (tests).

    Layout and format: laredo_core.snapshots.format. Contract:
    - a snapshot is written part by part, then its manifest (write_manifest) LAST: it exists, for
      list_snapshots and read_manifest, only once the manifest is complete; a writer that fails
      half-way leaves parts nobody reads;
    - list_snapshots(table): the complete snapshots of one table, newest first (by created_at);
      a manifest that cannot be parsed is logged and left out, never raised;
    - read_manifest(table, id): that snapshot's manifest, or None when it does not exist;
    - list_tables(): every table the store holds snapshots of, in no particular order (a table whose
      snapshots were all deleted, or that has only half-written ones, may still be listed: its
      list_snapshots is then empty); what is not a `<schema>.<table>` directory is ignored;
    - read_part: the bytes of one part file; raises SnapshotNotFound when it is missing;
    - delete_snapshot removes the manifest first (so a half-deleted snapshot is invisible), then
      every file under the snapshot; deleting a missing snapshot is no error;
    - several instances may share one store: ids are unique per writer (time + sequence + nonce);
    - every method raises SnapshotStoreUnavailable (retryable) when the store fails.
    Called from the event loop; adapters run blocking I/O in threads.
    """

    async def write_part(self, table: TableId, snapshot_id: str, name: str, data: bytes) -> None: ...

    async def write_manifest(self, manifest: SnapshotManifest) -> None: ...

    async def list_snapshots(self, table: TableId) -> list[SnapshotManifest]: ...

    async def read_manifest(self, table: TableId, snapshot_id: str) -> SnapshotManifest | None: ...

    async def list_tables(self) -> list[TableId]: ...

    async def read_part(self, table: TableId, snapshot_id: str, name: str) -> bytes: ...

    async def delete_snapshot(self, table: TableId, snapshot_id: str) -> None: ...
