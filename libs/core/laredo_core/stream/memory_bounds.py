"""The StreamBoundsReader port over MemoryChangeFeed's messages: unit tests and embedded use. Same contract as NATS."""

from __future__ import annotations

from laredo_kernel.changes import TableId
from laredo_core.stream.bounds import StreamBoundsUnavailable, SubjectBounds
from laredo_core.stream.memory_feed import MemoryChangeFeed


class MemoryStreamBoundsReader:
    """Reads where `feed` stands. Faults: `unreachable` (the next N calls raise a retryable
    StreamBoundsUnavailable), `missing = True` (the stream does not exist); `calls` counts bounds() calls."""

    def __init__(self, feed: MemoryChangeFeed) -> None:
        self._feed = feed
        self.unreachable = 0
        self.missing = False
        self.calls = 0

    async def bounds(self, source_id: str, table: TableId) -> SubjectBounds:
        self.calls += 1
        if self.unreachable > 0:
            self.unreachable -= 1
            raise StreamBoundsUnavailable("memory stream unreachable (injected fault)", retryable=True)
        if self.missing:
            raise StreamBoundsUnavailable(f"memory stream of source {source_id!r} does not exist (injected fault)",
                                          retryable=False)
        feed = self._feed
        stream, first, last = f"memory:{source_id}", feed.first_sequence, feed.last_sequence
        stored = feed.stored(table)
        sequence, data, _ = stored[-1] if stored else (0, b"", {})
        return SubjectBounds(stream, first, last, sequence, data)

    async def aclose(self) -> None:
        return None
