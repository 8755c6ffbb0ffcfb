"""The SnapshotStore port over a store of named files: the rules every adapter (directory, S3, memory) keeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from laredo_kernel.changes import TableId
from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_core.snapshots.format import MANIFEST_NAME, SnapshotManifest, manifest_from_json, manifest_to_json

log = logging.getLogger(__name__)
T = TypeVar("T")


class FileSnapshotStore:
    """The port's rules (manifest last, newest first, a bad manifest logged and left out) over a subclass's
    blocking file operations, which run in a thread.

    A subclass says where a file of a snapshot is (`_where`: SnapshotNotFound for an id that cannot be one), and
    puts, gets (None: missing), finds (`_manifest_files`: every manifest of a table), lists and deletes files;
    each of `_failures` they raise becomes SnapshotStoreUnavailable naming the store (`_name`).
    """

    _name: str
    _failures: tuple[type[Exception], ...] = (OSError,)

    def _where(self, table: TableId, snapshot_id: str, name: str) -> Any: ...
    def _put(self, where: Any, data: bytes) -> None: ...
    def _get(self, where: Any) -> bytes | None: ...
    def _manifest_files(self, table: TableId) -> Iterable[Any]: ...
    def _tables(self) -> list[TableId]: ...
    def _delete(self, table: TableId, snapshot_id: str) -> None: ...

    def _url(self, where: Any) -> str:
        return str(where)

    async def write_part(self, table: TableId, snapshot_id: str, name: str, data: bytes) -> None:
        await self._io(self._put, self._where(table, snapshot_id, name), data)

    async def write_manifest(self, manifest: SnapshotManifest) -> None:
        where = self._where(manifest.table, manifest.snapshot_id, MANIFEST_NAME)
        await self._io(self._put, where, manifest_to_json(manifest))

    async def list_snapshots(self, table: TableId) -> list[SnapshotManifest]:
        return await self._io(self._list, table)

    async def read_manifest(self, table: TableId, snapshot_id: str) -> SnapshotManifest | None:
        try:
            where = self._where(table, snapshot_id, MANIFEST_NAME)
        except SnapshotNotFound:
            return None
        data = await self._io(self._get, where)
        return manifest_from_json(data, self._url(where)) if data is not None else None

    async def list_tables(self) -> list[TableId]:
        return await self._io(self._tables)

    async def read_part(self, table: TableId, snapshot_id: str, name: str) -> bytes:
        data = await self._io(self._get, self._where(table, snapshot_id, name))
        if data is None:
            raise SnapshotNotFound(f"{snapshot_id}/{name}")
        return data

    async def delete_snapshot(self, table: TableId, snapshot_id: str) -> None:
        await self._io(self._delete, table, snapshot_id)

    def _list(self, table: TableId) -> list[SnapshotManifest]:
        manifests = []
        for where in self._manifest_files(table):
            data = self._get(where)
            if data is None:
                continue  # deleted meanwhile
            try:
                manifests.append(manifest_from_json(data, self._url(where)))
            except SnapshotCorrupt as exc:
                log.error("ignoring snapshot at %s: %s", self._url(where), exc)
        return sorted(manifests, key=lambda m: (m.created_at, m.snapshot_id), reverse=True)

    async def _io(self, function: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(function, *args)
        except self._failures as exc:
            raise SnapshotStoreUnavailable(f"{self._name}: {exc}") from exc
