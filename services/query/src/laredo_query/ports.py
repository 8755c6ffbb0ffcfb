"""What the query core needs from the outside world: one Protocol per role, each with its contract."""

from __future__ import annotations

from typing import Protocol

from laredo_kernel.changes import TableId

# The change feed port is shared with other services (contract: laredo_core.stream.feed.ChangeFeed);
# the feed delivers JSON-compatible values here (json_values=True), the form query's rows hold.
from laredo_core.stream.feed import ChangeFeed as ChangeFeed
from laredo_core.stream.feed import ChangeSink as ChangeSink
from laredo_core.stream.feed import FeedMessage as FeedMessage
from laredo_core.stream.feed import FeedSubscription as FeedSubscription

from laredo_query.domain.snapshot_choice import StreamState


class Clock(Protocol):
    """Wall-clock time in Unix seconds (event timestamps when the source gives none)."""

    def now(self) -> float: ...


class StreamBounds(Protocol):
    """Where the change stream stands for one table (JetStream in production): read at start-up, before the
    feed starts, to choose the snapshot a table loads (laredo_query.domain.snapshot_choice).

    Contract:
    - state(source_id, table): the stream's first and last sequence, the last sequence of the table's subject and
      the columns (and key) its last message carries, decoded as the feed decodes them; no side effects;
      concurrent calls are allowed;
    - it raises StreamStateUnavailable: retryable when the server cannot be reached (the caller retries with
      backoff), not retryable when the stream does not exist;
    - aclose() releases the connection once start-up is over; a later call connects again.
    """

    async def state(self, source_id: str, table: TableId) -> StreamState: ...

    async def aclose(self) -> None: ...
