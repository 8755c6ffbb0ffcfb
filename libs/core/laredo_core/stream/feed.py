"""The change feed port (pure types, no NATS): reading the stream ingest publishes, one table subject at a time."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from laredo_kernel.changes import ChangeBatchInfo, TableId
from laredo_kernel.errors import LaredoError


@dataclass(frozen=True, slots=True)
class FeedSubscription:
    """One table of one source to consume, from the stream's start or after a stream sequence (restore)."""

    source_id: str
    table: TableId
    start_after_sequence: int = 0


@dataclass(frozen=True, slots=True)
class FeedMessage:
    """One decoded stream message for a subscribed table; row values are typed, or JSON-compatible when
    the feed was built with json_values=True (laredo_core.stream.codec.decode_batch)."""

    table: TableId
    batch: ChangeBatchInfo
    stream_sequence: int
    headers: Mapping[str, str] = field(default_factory=dict)
    data: bytes = b""  # the message as stored (dead letters keep the change they could not apply)


@dataclass(frozen=True, slots=True)
class UndecodableMessage:
    """A message on a subscribed table's subject that does not decode, with why."""

    source_id: str
    table: TableId
    stream_sequence: int
    data: bytes
    error: str


class ChangeSink(Protocol):
    """Receives what a ChangeFeed delivers; called on the event loop, one call at a time per table.

    A sink may also define `on_undecodable(message: UndecodableMessage) -> None`; a feed hands it the
    messages that do not decode, and logs them itself for a sink without it.
    """

    def on_batch(self, message: FeedMessage) -> None: ...

    def on_caught_up(self, table: TableId) -> None: ...


class FeedHealth(Protocol):
    """What a ChangeFeed may also report: the tables whose consumer stands still (no message taken for a while)
    although the stream holds newer messages for them, each with why. Called from any task, at any time;
    empty while every table keeps up. A service reports them in its readiness."""

    def stalled(self) -> Mapping[TableId, str]: ...


class ChangeFeed(Protocol):
    """The change stream ingest publishes (JetStream), read from its start for each table.

    Contract:
    - ordering: per table, messages arrive in stream order (which is source position order);
      tables are independent of each other;
    - delivery: every message of the table's subject with a stream sequence above the
      subscription's start_after_sequence (0: from the start of the stream), once per run();
      across runs (restarts) messages are delivered again, so the sink must skip positions it
      already applied (the idempotency key is the change Position); when the stream no longer
      holds the message right after start_after_sequence, delivery starts at the first one it
      holds and the gap is logged as an error (changes may be missing until the next baseline);
      when the stream ends before start_after_sequence (it was created again since), run()
      raises StreamMismatch;
    - values: typed, or JSON-compatible (what clients see) when the feed was built with
      json_values=True; UNCHANGED markers kept either way;
    - caught up: on_caught_up(table) is called once per table, after the last message that
      existed when the table's consumer started was delivered (at once when there was none);
    - bad input: a message that does not decode is handed to the sink's on_undecodable (when it
      has one: it keeps a dead letter) or else logged with its stream sequence, and skipped;
      delivery continues;
    - a stream that does not exist yet is waited for (with backoff and a log line), not an error;
    - run() returns only by cancellation; an exception raised by the sink ends it with that
      exception (a bug must not be swallowed).
    """

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None: ...


class StreamMismatch(LaredoError):
    """The stream ends before the sequence a subscription starts after (a restored snapshot's): it was
    created again since."""

    def __init__(self, stream: str, last_sequence: int, start_after: int, table: object) -> None:
        super().__init__(
            f"stream {stream} ends at sequence {last_sequence}, before the restored snapshot's {start_after}: it "
            f"was created again after the snapshot was taken. Remove the snapshots of {table} or switch off "
            "restoring them (fan-out: snapshot.restore_on_start = false), then start again"
        )


def hand_over_undecodable(sink: ChangeSink, message: UndecodableMessage, log: logging.Logger) -> None:
    """Give an undecodable message to a sink that keeps them (on_undecodable), or log it and move on."""
    keep = getattr(sink, "on_undecodable", None)
    if keep is not None:
        keep(message)
        return
    log.error("skipping undecodable message at stream sequence %d of %s: %s", message.stream_sequence,
              message.table, message.error)
