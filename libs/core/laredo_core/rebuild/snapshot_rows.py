"""Reading a snapshot's rows with every check the format asks for (part sizes and hashes, checksum, count)."""

from __future__ import annotations

import asyncio
from typing import Any

from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.format import Checksum, SnapshotManifest, decode_part, verify_part
from laredo_core.snapshots.store import SnapshotStore


async def read_verified_rows(store: SnapshotStore, manifest: SnapshotManifest) -> list[dict[str, Any]]:
    """Every row of the snapshot, in part order; SnapshotCorrupt when anything does not match its manifest,
    SnapshotNotFound / SnapshotStoreUnavailable from the store."""
    where = f"snapshot {manifest.snapshot_id} of {manifest.table}"
    checksum, rows = Checksum(), []
    for part in manifest.parts:
        data = await store.read_part(manifest.table, manifest.snapshot_id, part.name)
        checksum.update(data)
        verify_part(part, data, where)
        rows += await asyncio.to_thread(decode_part, manifest.format, data, where)
    if manifest.checksum and checksum.value != manifest.checksum:
        raise SnapshotCorrupt(f"{where}: checksum {checksum.value} differs from the manifest's {manifest.checksum}")
    if len(rows) != manifest.row_count:
        raise SnapshotCorrupt(f"{where}: {len(rows)} rows, the manifest says {manifest.row_count}")
    return rows
