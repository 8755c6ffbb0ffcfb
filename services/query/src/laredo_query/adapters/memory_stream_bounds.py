"""The StreamBounds port over MemoryChangeFeed's messages: unit tests and embedded use. Same contract as NATS."""

from __future__ import annotations

import logging

from laredo_core.changes import TableId
from laredo_core.errors import ProtocolError
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.memory_feed import MemoryChangeFeed

from laredo_query.domain.snapshot_choice import StreamState, StreamStateUnavailable

log = logging.getLogger(__name__)


class MemoryStreamBounds:
    """Reads where `feed` stands. Faults: `unreachable` (the next N calls raise a retryable
    StreamStateUnavailable), `missing = True` (the stream does not exist); `calls` counts state() calls."""

    def __init__(self, feed: MemoryChangeFeed) -> None:
        self._feed = feed
        self.unreachable = 0
        self.missing = False
        self.calls = 0

    async def state(self, source_id: str, table: TableId) -> StreamState:
        self.calls += 1
        if self.unreachable > 0:
            self.unreachable -= 1
            raise StreamStateUnavailable("memory stream unreachable (injected fault)", retryable=True)
        if self.missing:
            raise StreamStateUnavailable(f"memory stream of source {source_id!r} does not exist (injected fault)",
                                         retryable=False)
        feed = self._feed
        stream, first, last = f"memory:{source_id}", feed.first_sequence, feed.last_sequence
        stored = feed.stored(table)
        if not stored:
            return StreamState(stream, first, last, 0)
        sequence, data, _ = stored[-1]
        try:
            batch = decode_batch(data, json_values=True)
        except ProtocolError as exc:
            log.warning("the last message of %s (stream sequence %d) does not decode: %s", table, sequence, exc)
            return StreamState(stream, first, last, sequence)
        return StreamState(stream, first, last, sequence, batch.columns, batch.key_columns)

    async def aclose(self) -> None:
        return None
