"""The SnapshotStore port on a local directory: <path>/<schema>.<table>/<snapshot_id>/{rows-*, manifest.json}.

Every file is written to a temporary name and renamed, so a reader never sees half a file; the manifest
is renamed into place last. Blocking file I/O runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path

from laredo_kernel.changes import TableId

from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_core.snapshots.format import (
    MANIFEST_NAME,
    SnapshotManifest,
    manifest_from_json,
    manifest_to_json,
    table_directory,
    table_from_directory,
)
from laredo_core.snapshots.memory_store import newest_first

log = logging.getLogger(__name__)


class LocalSnapshotStore:
    def __init__(self, path: str | Path) -> None:
        self._root = Path(path)

    def _dir(self, table: TableId, snapshot_id: str) -> Path:
        if not snapshot_id or "/" in snapshot_id or snapshot_id.startswith("."):
            raise SnapshotNotFound(snapshot_id)
        return self._root / table_directory(table) / snapshot_id

    async def write_part(self, table: TableId, snapshot_id: str, name: str, data: bytes) -> None:
        await self._io(_write_file, self._dir(table, snapshot_id) / name, data)

    async def write_manifest(self, manifest: SnapshotManifest) -> None:
        target = self._dir(manifest.table, manifest.snapshot_id) / MANIFEST_NAME
        await self._io(_write_file, target, manifest_to_json(manifest))

    async def list_snapshots(self, table: TableId) -> list[SnapshotManifest]:
        return await self._io(self._list, table)

    def _list(self, table: TableId) -> list[SnapshotManifest]:
        directory = self._root / table_directory(table)
        if not directory.is_dir():
            return []
        manifests = []
        for path in directory.glob(f"*/{MANIFEST_NAME}"):
            try:
                manifests.append(manifest_from_json(path.read_bytes(), str(path)))
            except (SnapshotCorrupt, FileNotFoundError) as exc:  # a concurrent delete, or a bad file
                log.error("ignoring snapshot at %s: %s", path.parent, exc)
        return newest_first(manifests)

    async def read_manifest(self, table: TableId, snapshot_id: str) -> SnapshotManifest | None:
        try:
            path = self._dir(table, snapshot_id) / MANIFEST_NAME
        except SnapshotNotFound:
            return None
        data = await self._io(_read_file, path)
        return manifest_from_json(data, str(path)) if data is not None else None

    async def list_tables(self) -> list[TableId]:
        return await self._io(self._tables)

    def _tables(self) -> list[TableId]:
        if not self._root.exists():
            return []  # nothing written yet; a root that is not a directory fails in iterdir (misconfigured)
        found = (table_from_directory(entry.name) for entry in self._root.iterdir() if entry.is_dir())
        return [table for table in found if table is not None]

    async def read_part(self, table: TableId, snapshot_id: str, name: str) -> bytes:
        data = await self._io(_read_file, self._dir(table, snapshot_id) / name)
        if data is None:
            raise SnapshotNotFound(f"{snapshot_id}/{name}")
        return data

    async def delete_snapshot(self, table: TableId, snapshot_id: str) -> None:
        await self._io(_delete_dir, self._dir(table, snapshot_id))

    async def _io(self, function, *args):  # type: ignore[no-untyped-def]
        try:
            return await asyncio.to_thread(function, *args)
        except OSError as exc:
            raise SnapshotStoreUnavailable(f"local snapshot store at {self._root}: {exc}") from exc


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _delete_dir(directory: Path) -> None:
    (directory / MANIFEST_NAME).unlink(missing_ok=True)  # invisible first, then gone
    shutil.rmtree(directory, ignore_errors=True)
