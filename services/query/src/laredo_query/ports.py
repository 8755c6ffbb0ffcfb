"""What the query core needs from the outside world: one Protocol per role, each with its contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from laredo_core.changes import ChangeBatchInfo, TableId


@dataclass(frozen=True, slots=True)
class FeedSubscription:
    """One table of one source to consume."""

    source_id: str
    table: TableId


@dataclass(frozen=True, slots=True)
class FeedMessage:
    """One decoded stream message for a subscribed table."""

    table: TableId
    batch: ChangeBatchInfo
    stream_sequence: int
    headers: Mapping[str, str] = field(default_factory=dict)


class ChangeSink(Protocol):
    """Receives what a ChangeFeed delivers; called on the event loop, one call at a time per table."""

    def on_batch(self, message: FeedMessage) -> None: ...

    def on_caught_up(self, table: TableId) -> None: ...


class ChangeFeed(Protocol):
    """The change stream ingest publishes (JetStream), read from its start for each table.

    Contract:
    - ordering: per table, messages arrive in stream order (which is source position order); tables
      are independent of each other;
    - delivery: every message of the table's subject from the start of the stream, once per run();
      across runs (restarts) everything is delivered again, so the sink skips positions it already
      applied (the idempotency key is the change Position);
    - caught up: on_caught_up(table) is called once per table, after the last message that existed
      when the table's consumer started was delivered (at once when there was none);
    - bad input: a message that does not decode is logged with its stream sequence and skipped;
      delivery continues;
    - a stream that does not exist yet is waited for (with backoff and a log line), not an error;
    - run() returns only by cancellation; an exception raised by the sink ends it with that exception.
    """

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None: ...


class Clock(Protocol):
    """Wall-clock time in Unix seconds (event timestamps when the source gives none)."""

    def now(self) -> float: ...
