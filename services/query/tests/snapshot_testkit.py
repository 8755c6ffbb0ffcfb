"""Snapshots for query tests, written with the shared format functions as the snapshot service writes them."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.jsonvalue import row_to_json
from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part, new_snapshot_id
from laredo_core.snapshots.store import SnapshotStore

SNAPSHOT_SERVICE = "laredo-snapshot"


def key_of(columns: Sequence[ColumnInfo]) -> tuple[str, ...]:
    primary = sorted((c for c in columns if c.primary_key_ordinal), key=lambda c: c.primary_key_ordinal)
    return tuple(c.name for c in primary)


async def store_snapshot(store: SnapshotStore, table: TableId, columns: Sequence[ColumnInfo],
                         rows: Sequence[Mapping[str, Any]], *, position: str, stream_sequence: int,
                         created_at: float, part_rows: int = 3, producer: str = SNAPSHOT_SERVICE,
                         key_columns: Sequence[str] | None = None, fmt: str = "jsonl") -> SnapshotManifest:
    """Write typed `rows` as a snapshot in format `fmt` (JSON values, parts of `part_rows` rows, the manifest
    last); the snapshot service's manifests carry journal_sequence 0."""
    json_rows = [row_to_json(dict(r)) for r in rows]
    snapshot_id = new_snapshot_id(created_at, 0, secrets.token_hex(3))
    checksum, parts = Checksum(), []
    for index, start in enumerate(range(0, max(len(json_rows), 1), part_rows)):
        part, data = encode_part(index, json_rows[start:start + part_rows], fmt, columns)
        checksum.update(data)
        await store.write_part(table, snapshot_id, part.name, data)
        parts.append(part)
    manifest = SnapshotManifest(
        snapshot_id=snapshot_id, table=table, columns=tuple(columns),
        key_columns=tuple(key_columns if key_columns is not None else key_of(columns)), row_count=len(json_rows),
        source_position=position, stream_sequence=stream_sequence, journal_sequence=0, created_at=created_at,
        parts=tuple(parts), checksum=checksum.value, source_id="pg", producer=producer, format=fmt)
    await store.write_manifest(manifest)
    return manifest
