"""The SnapshotStore port in memory, for unit tests and the single-process mode."""

from __future__ import annotations

import logging

from laredo_kernel.changes import TableId
from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_core.snapshots.format import SnapshotManifest, manifest_from_json, manifest_to_json

log = logging.getLogger(__name__)


class MemorySnapshotStore:
    """The SnapshotStore port in memory, with the same visibility rules (manifest last, newest first).

    Faults: `unavailable = True` makes every call raise SnapshotStoreUnavailable.
    """

    def __init__(self) -> None:
        self._parts: dict[tuple[TableId, str], dict[str, bytes]] = {}
        self._manifests: dict[tuple[TableId, str], bytes] = {}
        self.unavailable = False

    def _check(self) -> None:
        if self.unavailable:
            raise SnapshotStoreUnavailable("memory snapshot store set unavailable (injected fault)")

    async def write_part(self, table: TableId, snapshot_id: str, name: str, data: bytes) -> None:
        self._check()
        self._parts.setdefault((table, snapshot_id), {})[name] = bytes(data)

    async def write_manifest(self, manifest: SnapshotManifest) -> None:
        self._check()
        self._manifests[(manifest.table, manifest.snapshot_id)] = manifest_to_json(manifest)

    async def list_snapshots(self, table: TableId) -> list[SnapshotManifest]:
        self._check()
        manifests = []
        for (owner, snapshot_id), data in list(self._manifests.items()):
            if owner == table:
                try:
                    manifests.append(manifest_from_json(data, f"memory:{table}/{snapshot_id}"))
                except SnapshotCorrupt as exc:
                    log.error("ignoring snapshot %s of %s: %s", snapshot_id, table, exc)
        return newest_first(manifests)

    async def read_manifest(self, table: TableId, snapshot_id: str) -> SnapshotManifest | None:
        self._check()
        data = self._manifests.get((table, snapshot_id))
        return manifest_from_json(data, f"memory:{table}/{snapshot_id}") if data is not None else None

    async def list_tables(self) -> list[TableId]:
        self._check()
        return list({table: None for table, _ in [*self._manifests, *self._parts]})

    async def read_part(self, table: TableId, snapshot_id: str, name: str) -> bytes:
        self._check()
        try:
            return self._parts[(table, snapshot_id)][name]
        except KeyError:
            raise SnapshotNotFound(f"{snapshot_id}/{name}") from None

    async def delete_snapshot(self, table: TableId, snapshot_id: str) -> None:
        self._check()
        self._manifests.pop((table, snapshot_id), None)
        self._parts.pop((table, snapshot_id), None)


def newest_first(manifests: list[SnapshotManifest]) -> list[SnapshotManifest]:
    return sorted(manifests, key=lambda m: (m.created_at, m.snapshot_id), reverse=True)
