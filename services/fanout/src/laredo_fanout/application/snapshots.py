"""Fan-out snapshots of one target: taken every interval, kept by retention, listed, fetched and restored.

A snapshot captures rows, columns, source position, stream sequence and journal sequence in one step (no await in
between; rows are immutable, so serializing them later in a thread is safe). Parts are written one by one, the
manifest last. Never taken during a baseline (its rows would be incomplete).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from laredo_kernel.position import PositionError
from laredo_core.rebuild.snapshot_rows import read_verified_rows
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.format import (FORMAT, Checksum, SnapshotManifest, SnapshotPart, decode_part, encode_part,
                                          expired, new_snapshot_id, verify_part)

from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_fanout.domain.table_state import StoredRow
from laredo_fanout.ports import Clock, SnapshotStore, SyncEncoder

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    interval: float = 300.0  # seconds between snapshots; 0 = none taken periodically
    store: StoreConfig = field(default_factory=StoreConfig)  # main.py opens it
    keep_count: int = 5  # 0 = no count limit
    max_age: float = 0.0  # seconds; 0 = no age limit
    part_rows: int = 100_000
    restore_on_start: bool = True
    format: str = FORMAT  # `serializer` of the snapshots taken here (each manifest names its own: any is read)


class TableSnapshots:
    def __init__(self, replica: TableReplica, store: SnapshotStore, policy: SnapshotPolicy, *, encoder: SyncEncoder,
                 clock: Clock) -> None:
        self.replica, self.table = replica, replica.table
        self.store = store
        self.policy = policy
        self._encoder = encoder
        self._clock = clock
        self._taking = asyncio.Lock()  # the timer, an OAM command and the stop may ask at once: one at a time

    async def run(self) -> None:
        """Take a snapshot every interval; store failures are logged and retried at the next one."""
        if self.policy.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.policy.interval)  # a timer, not a hot path
            try:
                await self.take()
            except SnapshotStoreUnavailable as exc:
                log.warning("%s: snapshot not stored (%s); retrying in %.0fs", self.table, exc, self.policy.interval)

    async def take(self, *, user_meta: Mapping[str, Any] | None = None, force: bool = False
                   ) -> SnapshotManifest | None:
        """Snapshot the current state, `user_meta` (OAM CreateSnapshot's JSON object) in its manifest; None when
        it cannot be taken now (unavailable_reason says why) or, unless `force` (an operator's request), when
        nothing changed since the latest snapshot."""
        async with self._taking:
            return await self._take(dict(user_meta or {}), force)

    def unavailable_reason(self) -> str:
        """Why no snapshot can be taken right now, or "" when one can."""
        replica = self.replica
        if replica.state.baseline_in_progress:
            return f"{self.table} is in the middle of a baseline; retry once it is loaded"
        if not replica.ready or replica.applied_position is None:
            return f"{self.table} is not loaded yet (not ready); retry once it is"
        return ""

    async def _take(self, user_meta: dict[str, Any], force: bool) -> SnapshotManifest | None:
        replica = self.replica
        position = replica.applied_position
        latest = replica.latest_snapshot
        if self.unavailable_reason() or position is None:
            return None
        if not force and latest is not None and latest.source_position == str(position) \
                and await self._still_stored(latest):
            return None
        rows = replica.state.rows()  # read back into values part by part, in a worker thread (see _write)
        created = self._clock.now()
        base = SnapshotManifest(
            snapshot_id=new_snapshot_id(created, replica.journal.current_sequence, secrets.token_hex(3)),
            table=replica.table, columns=replica.columns, key_columns=replica.state.key_columns,
            row_count=len(rows), source_position=str(position), stream_sequence=replica.stream_sequence,
            journal_sequence=replica.journal.current_sequence, created_at=created, parts=(), checksum="",
            source_id=replica.source_id, format=self.policy.format, user_meta=user_meta)
        manifest = await self._write(base, rows)
        replica.latest_snapshot = manifest
        log.info("%s: snapshot %s stored (%d rows, position %s, %d bytes)", self.table, manifest.snapshot_id,
                 manifest.row_count, manifest.source_position, manifest.size_bytes)
        await self.apply_retention()
        return manifest

    async def _still_stored(self, latest: SnapshotManifest) -> bool:
        """Whether the latest snapshot is still in the store: an operator may have deleted it (OAM's
        DeleteSnapshot), and a table that has not changed since must then be snapshotted again."""
        if await self.store.read_manifest(self.table, latest.snapshot_id) is not None:
            return True
        log.info("%s: the latest snapshot %s is no longer in the store; taking a new one", self.table,
                 latest.snapshot_id)
        if self.replica.latest_snapshot is latest:
            self.replica.latest_snapshot = None
        return False

    async def _write(self, base: SnapshotManifest, rows: list[StoredRow]) -> SnapshotManifest:
        checksum, parts, step = Checksum(), [], self.policy.part_rows
        decode = self.replica.state.decode
        for index, start in enumerate(range(0, max(len(rows), 1), step)):
            part, data = await asyncio.to_thread(_encoded_part, index, rows[start:start + step], decode, base)
            checksum.update(data)
            await self.store.write_part(base.table, base.snapshot_id, part.name, data)
            parts.append(part)
        manifest = replace(base, parts=tuple(parts), checksum=checksum.value)
        await self.store.write_manifest(manifest)
        return manifest

    async def apply_retention(self) -> None:
        manifests = await self.store.list_snapshots(self.table)
        for manifest in expired(manifests, self._clock.now(), self.policy.keep_count, self.policy.max_age):
            await self.store.delete_snapshot(self.table, manifest.snapshot_id)
            log.info("%s: snapshot %s removed by retention", self.table, manifest.snapshot_id)

    async def list(self, limit: int = 0) -> list[SnapshotManifest]:
        manifests = await self.store.list_snapshots(self.table)
        self.replica.latest_snapshot = manifests[0] if manifests else None
        return manifests[:limit] if limit > 0 else manifests

    async def find(self, snapshot_id: str) -> SnapshotManifest | None:
        """The snapshot's manifest as the store holds it now (None once deleted: no cache can outlive a
        DeleteSnapshot)."""
        return await self.store.read_manifest(self.table, snapshot_id)

    async def stored_rows(self, manifest: SnapshotManifest) -> AsyncIterator[list[StoredRow]]:
        """The snapshot's rows part by part, each checked against the manifest and encoded for clients."""
        for part in manifest.parts:
            where = f"snapshot {manifest.snapshot_id} of {self.table}"
            data = await self.store.read_part(self.table, manifest.snapshot_id, part.name)
            yield await asyncio.to_thread(self._decode_part, manifest.format, part, data, where)

    def _decode_part(self, fmt: str, part: Any, data: bytes, where: str) -> list[StoredRow]:
        verify_part(part, data, where)
        encode = self._encoder.encode_row
        return [StoredRow((), encode(values)) for values in decode_part(fmt, data, where)]

    async def restore_newest(self) -> SnapshotManifest | None:
        """Load the newest usable snapshot into the replica; older ones are tried when one is damaged."""
        try:
            manifests = await self.store.list_snapshots(self.table)
        except SnapshotStoreUnavailable as exc:
            log.warning("%s: cannot list snapshots (%s); rebuilding from the stream", self.table, exc)
            return None
        for manifest in manifests:
            try:
                if manifest.table != self.table:
                    raise SnapshotCorrupt(f"snapshot {manifest.snapshot_id} of {self.table}: its manifest names "
                                          f"table {manifest.table}")
                rows = await read_verified_rows(self.store, manifest)
                await asyncio.to_thread(self.replica.state.restore_rows, manifest.key_columns, rows)
                self.replica.restored(manifest)
            except (SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable, PositionError) as exc:
                log.error("%s: snapshot %s unusable (%s); trying an older one", self.table, manifest.snapshot_id, exc)
                continue
            log.info("%s: restored snapshot %s (%d rows at %s); consuming the stream after sequence %d",
                     self.table, manifest.snapshot_id, manifest.row_count, manifest.source_position,
                     manifest.stream_sequence)
            return manifest
        return None


def _encoded_part(index: int, rows: list[StoredRow], decode: Callable[[StoredRow], dict[str, Any]],
                  base: SnapshotManifest) -> tuple[SnapshotPart, bytes]:
    """Part `index` of the snapshot: the rows read back into values and encoded in the snapshot's format."""
    return encode_part(index, [decode(row) for row in rows], base.format, base.columns)
