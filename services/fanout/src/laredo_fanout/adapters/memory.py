"""In-memory adapters for every port: unit tests and embedded use. Same contracts as the real ones."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from laredo_kernel.changes import TableId
from laredo_core.snapshots.memory_store import MemorySnapshotStore as MemorySnapshotStore
from laredo_core.stream.memory_feed import MemoryChangeFeed as SharedMemoryChangeFeed

from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.ports import FeedMessage


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
