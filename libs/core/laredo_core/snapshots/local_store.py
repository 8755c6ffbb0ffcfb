"""The SnapshotStore port on a local directory: <path>/<schema>.<table>/<snapshot_id>/<file>.

Every file is written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from laredo_kernel.changes import TableId

from laredo_core.snapshots.file_store import FileSnapshotStore
from laredo_core.snapshots.errors import SnapshotNotFound
from laredo_core.snapshots.format import MANIFEST_NAME, table_directory, table_from_directory


class LocalSnapshotStore(FileSnapshotStore):
    def __init__(self, path: str | Path) -> None:
        self._root = Path(path)
        self._name = f"local snapshot store at {self._root}"

    def _dir(self, table: TableId, snapshot_id: str) -> Path:
        if not snapshot_id or "/" in snapshot_id or snapshot_id.startswith("."):
            raise SnapshotNotFound(snapshot_id)
        return self._root / table_directory(table) / snapshot_id

    def _where(self, table: TableId, snapshot_id: str, name: str) -> Path:
        return self._dir(table, snapshot_id) / name

    def _put(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)

    def _get(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def _manifest_files(self, table: TableId) -> Iterable[Path]:
        return (self._root / table_directory(table)).glob(f"*/{MANIFEST_NAME}")

    def _tables(self) -> list[TableId]:
        if not self._root.exists():
            return []  # nothing written yet; a root that is not a directory fails in iterdir (misconfigured)
        found = (table_from_directory(entry.name) for entry in self._root.iterdir() if entry.is_dir())
        return [table for table in found if table is not None]

    def _delete(self, table: TableId, snapshot_id: str) -> None:
        directory = self._dir(table, snapshot_id)
        (directory / MANIFEST_NAME).unlink(missing_ok=True)  # invisible first, then gone
        shutil.rmtree(directory, ignore_errors=True)
