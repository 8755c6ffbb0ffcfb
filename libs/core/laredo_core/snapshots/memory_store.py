"""The SnapshotStore port in memory, for unit tests and the single-process mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from laredo_kernel.changes import TableId
from laredo_core.snapshots.errors import SnapshotStoreUnavailable
from laredo_core.snapshots.file_store import FileSnapshotStore
from laredo_core.snapshots.format import MANIFEST_NAME

T = TypeVar("T")
#: Where a file of a snapshot is: its table, snapshot id and file name.
Where = tuple[TableId, str, str]


class MemorySnapshotStore(FileSnapshotStore):
    """The SnapshotStore port in memory, with the same visibility rules (manifest last, newest first).

    Faults: `unavailable = True` makes every call raise SnapshotStoreUnavailable.
    """

    def __init__(self) -> None:
        self._parts: dict[tuple[TableId, str], dict[str, bytes]] = {}
        self._manifests: dict[tuple[TableId, str], bytes] = {}
        self.unavailable = False

    def _where(self, table: TableId, snapshot_id: str, name: str) -> Where:
        return table, snapshot_id, name

    def _url(self, where: Where) -> str:
        return f"memory:{where[0]}/{where[1]}"

    def _put(self, where: Where, data: bytes) -> None:
        table, snapshot_id, name = where
        if name == MANIFEST_NAME:
            self._manifests[(table, snapshot_id)] = data
        else:
            self._parts.setdefault((table, snapshot_id), {})[name] = bytes(data)

    def _get(self, where: Where) -> bytes | None:
        table, snapshot_id, name = where
        if name == MANIFEST_NAME:
            return self._manifests.get((table, snapshot_id))
        return self._parts.get((table, snapshot_id), {}).get(name)

    def _manifest_files(self, table: TableId) -> list[Where]:
        return [(owner, snapshot_id, MANIFEST_NAME) for owner, snapshot_id in self._manifests if owner == table]

    def _tables(self) -> list[TableId]:
        return list({table: None for table, _ in [*self._manifests, *self._parts]})

    def _delete(self, table: TableId, snapshot_id: str) -> None:
        self._manifests.pop((table, snapshot_id), None)
        self._parts.pop((table, snapshot_id), None)

    async def _io(self, function: Callable[..., T], *args: Any) -> T:
        if self.unavailable:
            raise SnapshotStoreUnavailable("memory snapshot store set unavailable (injected fault)")
        return function(*args)
