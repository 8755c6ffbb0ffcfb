"""In-memory adapters for every port: unit tests and embedded use. Same contracts as the real ones."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from laredo_core.changes import TableId
from laredo_core.errors import ProtocolError
from laredo_core.stream.codec import decode_batch

from laredo_fanout.domain.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable, StreamMismatch
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.snapshot_format import SnapshotManifest, manifest_from_json, manifest_to_json
from laredo_fanout.ports import ChangeSink, FeedMessage, FeedSubscription

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _StoredMessage:
    stream_sequence: int
    data: bytes
    headers: dict[str, str]


class MemoryChangeFeed:
    """A JetStream stand-in: one ordered log per table, holding encoded ChangeBatch bytes.

    Faults: `stream_exists=False` makes run() wait until create_stream(); `delivery_delay`
    (seconds) is awaited before each delivery.
    """

    def __init__(self, *, stream_exists: bool = True, delivery_delay: float = 0.0) -> None:
        self._logs: dict[TableId, list[_StoredMessage]] = {}
        self._sequence = 0
        self._stream_exists = asyncio.Event()
        if stream_exists:
            self._stream_exists.set()
        self._published = asyncio.Event()
        self.delivery_delay = delivery_delay

    def create_stream(self) -> None:
        self._stream_exists.set()

    def publish(self, table: TableId, data: bytes, headers: Mapping[str, str] | None = None) -> int:
        """Append one message to the table's subject; returns its stream sequence."""
        if not self._stream_exists.is_set():
            raise RuntimeError("no stream: call create_stream() first (JetStream would not accept it)")
        self._sequence += 1
        self._logs.setdefault(table, []).append(_StoredMessage(self._sequence, data, dict(headers or {})))
        event, self._published = self._published, asyncio.Event()
        event.set()
        return self._sequence

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None:
        if not self._stream_exists.is_set():
            log.info("stream does not exist yet; waiting for it")
            await self._stream_exists.wait()
        tasks = [asyncio.create_task(self._deliver(s, sink)) for s in subscriptions]
        try:
            await asyncio.gather(*tasks)  # a sink error ends the run with that error
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _deliver(self, subscription: FeedSubscription, sink: ChangeSink) -> None:
        table = subscription.table
        if subscription.start_after_sequence > self._sequence:
            raise StreamMismatch("memory", self._sequence, subscription.start_after_sequence, table)
        messages = self._logs.setdefault(table, [])
        delivered = sum(1 for m in messages if m.stream_sequence <= subscription.start_after_sequence)
        caught_up_at = len(messages)
        if caught_up_at == delivered:
            sink.on_caught_up(table)
        while True:
            published = self._published
            while delivered < len(messages):
                if self.delivery_delay:
                    await asyncio.sleep(self.delivery_delay)
                _deliver_one(table, messages[delivered], sink)
                delivered += 1
                if delivered == caught_up_at:
                    sink.on_caught_up(table)
            await published.wait()


def _deliver_one(table: TableId, message: _StoredMessage, sink: ChangeSink) -> None:
    try:
        batch = decode_batch(message.data, json_values=True)
    except ProtocolError as exc:
        log.error("skipping undecodable message %d of %s: %s", message.stream_sequence, table, exc)
        return
    sink.on_batch(FeedMessage(table, batch, message.stream_sequence, message.headers))


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
