"""Start-up from snapshots: each table loads its newest usable snapshot, then the feed consumes only the stream
after the snapshot's stream sequence (instead of the whole stream).

Snapshots are tried newest first; one is used when the stream still continues it and carries its columns
(domain.snapshot_choice) and its parts match the manifest (snapshot_loader), else the next older one is tried
(the reason logged). With none usable, a store that cannot be listed or a stream that does not exist, the table
reads the whole stream; a NATS server that cannot be reached is waited for (the feed could not start without it
either). The rows load into a private IndexedTable in a worker thread and replace the table's empty one on the
event loop; the table then counts as baselined at the snapshot's position.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from laredo_kernel.changes import TableId
from laredo_core.snapshots.errors import SnapshotError, SnapshotStoreUnavailable
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.snapshots.store import SnapshotStore

from laredo_query.application.query_table import QueryTable
from laredo_query.application.snapshot_loader import SnapshotLoader
from laredo_query.domain.indexes import IndexDefinition
from laredo_query.domain.snapshot_choice import StreamState, StreamStateUnavailable, unusable_reason
from laredo_query.ports import StreamBounds

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RestoreSource:
    """One table that may start from a snapshot: where its snapshots are and the indexes it keeps."""

    table: QueryTable
    definitions: tuple[IndexDefinition, ...]
    store: SnapshotStore


class StartupRestore:
    """Run restore() once, before the feed starts; see the module docstring."""

    def __init__(self, sources: Sequence[RestoreSource], bounds: StreamBounds, *,
                 retry: tuple[float, float] = (0.25, 5.0)) -> None:
        self._sources = list(sources)
        self._bounds = bounds
        self._retry = retry  # the first and the longest delay between attempts to read where the stream stands

    async def restore(self) -> dict[TableId, SnapshotManifest]:
        """The snapshot each restored table was loaded from (tables absent: they read the whole stream)."""
        restored: dict[TableId, SnapshotManifest] = {}
        try:
            for source in self._sources:
                manifest = await self._restore_table(source)
                if manifest is not None:
                    restored[source.table.table] = manifest
        finally:
            await self._bounds.aclose()
        return restored

    async def _restore_table(self, source: RestoreSource) -> SnapshotManifest | None:
        table = source.table.table
        if source.table.applied_position is not None or len(source.table.indexed):
            return None  # something was applied already: a snapshot would go back in time
        try:
            manifests = await source.store.list_snapshots(table)
        except SnapshotStoreUnavailable as exc:
            log.warning("%s: cannot list its snapshots (%s); reading the whole stream", table, exc)
            return None
        if not manifests:
            log.info("%s: no snapshot in the store; reading the whole stream", table)
            return None
        stream = await self._stream_state(source)
        if stream is None:
            return None
        for manifest in manifests:
            reason = unusable_reason(manifest, table, stream) or await self._load(source, manifest)
            if not reason:
                log.info("%s: loaded snapshot %s (%d rows at %s, written by %s); consuming the stream after "
                         "sequence %d", table, manifest.snapshot_id, len(source.table.indexed),
                         manifest.source_position, manifest.producer or "an unknown producer",
                         manifest.stream_sequence)
                return manifest
            log.warning("%s: snapshot %s not used: %s; trying an older one", table, manifest.snapshot_id, reason)
        log.warning("%s: none of its %d snapshots is usable; reading the whole stream", table, len(manifests))
        return None

    async def _stream_state(self, source: RestoreSource) -> StreamState | None:
        table, (delay, longest) = source.table.table, self._retry
        while True:
            try:
                return await self._bounds.state(source.table.source_id, table)
            except StreamStateUnavailable as exc:
                if not exc.retryable:
                    log.warning("%s: %s; no snapshot can continue it, reading the whole stream", table, exc)
                    return None
                log.warning("%s: %s; retrying in %.1fs before choosing a snapshot", table, exc, delay)
            await asyncio.sleep(delay)  # start-up retry, not a hot path
            delay = min(delay * 2, longest)

    async def _load(self, source: RestoreSource, manifest: SnapshotManifest) -> str:
        """Load the snapshot into the table; "" once installed, else why it could not be (the table unchanged)."""
        table = source.table
        try:
            loader = SnapshotLoader(table.name, source.definitions, manifest)
            for part in manifest.parts:
                data = await source.store.read_part(table.table, manifest.snapshot_id, part.name)
                await asyncio.to_thread(loader.add_part, part, data)
            indexed = loader.finish()
        except SnapshotError as exc:
            return str(exc)
        if loader.rejected:
            log.warning("%s: %d rows of snapshot %s break a unique index and were left out, as their changes would "
                        "be dead letters (first: %s)", table.table, loader.rejected, manifest.snapshot_id,
                        loader.first_rejection)
            table.skipped_changes += loader.rejected
        # the loaded rows become the table's, at the snapshot's position: what the stream after it builds on
        table.indexed, table.applied_position = indexed, loader.position
        table.mark_baseline_complete()
        return ""
