"""The StreamTail port over MemoryChangeFeed's messages: unit tests and embedded use. Same contract as NATS."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from laredo_kernel.changes import TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.rebuild.tail import check_holds
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.feed import FeedMessage
from laredo_core.stream.memory_feed import MemoryChangeFeed

log = logging.getLogger(__name__)


class MemoryStreamTail:
    """Reads the tail of a table from `feed`; `json_values` as for the feed (typed or JSON-compatible values)."""

    def __init__(self, feed: MemoryChangeFeed, *, json_values: bool = False) -> None:
        self._feed = feed
        self._json_values = json_values

    async def aclose(self) -> None:
        return None

    async def read(self, source_id: str, table: TableId, after: int, up_to: int) -> AsyncIterator[FeedMessage]:
        if up_to <= after:
            return
        check_holds(f"memory:{source_id}", table, self._feed.first_sequence, self._feed.last_sequence, after, up_to)
        for sequence, data, headers in self._feed.stored(table):
            if sequence <= after:
                continue
            if sequence > up_to:
                return
            try:
                batch = decode_batch(data, json_values=self._json_values)
            except ProtocolError as exc:
                log.error("skipping undecodable message %d of %s: %s", sequence, table, exc)
                continue
            yield FeedMessage(table, batch, sequence, headers)
