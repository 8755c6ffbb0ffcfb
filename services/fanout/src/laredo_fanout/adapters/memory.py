"""In-memory adapters for every port: unit tests and embedded use. Same contracts as the real ones."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from laredo_core.changes import TableId
from laredo_core.stream.memory_feed import MemoryChangeFeed as SharedMemoryChangeFeed

from laredo_fanout.domain.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.snapshot_format import SnapshotManifest, manifest_from_json, manifest_to_json
from laredo_fanout.ports import FeedMessage

log = logging.getLogger(__name__)


class MemoryChangeFeed(SharedMemoryChangeFeed):
    """The shared in-memory ChangeFeed, delivering JSON-compatible values as the fan-out's feed does."""

    def __init__(self, *, stream_exists: bool = True, delivery_delay: float = 0.0) -> None:
        super().__init__(json_values=True, stream_exists=stream_exists, delivery_delay=delivery_delay)


class ManualClock:
    """A Clock that moves only when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


class SilentObserver:
    """An Observer that records nothing: tracing switched off (telemetry.exporter = none)."""

    @contextmanager
    def applying(self, message: FeedMessage) -> Iterator[object | None]:
        yield None

    def entries_sent(self, table: TableId, client_id: str, entries: Sequence[JournalEntry]) -> None:
        return None


@dataclass(slots=True)
class RecordingObserver:
    """An Observer that remembers what it saw: applied messages and (client, sequence) sends."""

    applied: list[FeedMessage] = field(default_factory=list)
    sent: list[tuple[str, int]] = field(default_factory=list)

    @contextmanager
    def applying(self, message: FeedMessage) -> Iterator[object | None]:
        self.applied.append(message)
        yield message.stream_sequence

    def entries_sent(self, table: TableId, client_id: str, entries: Sequence[JournalEntry]) -> None:
        self.sent.extend((client_id, e.sequence) for e in entries)


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
