"""The StreamTail port: one table's stream messages between two stream sequences, for a rebuild."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from laredo_kernel.changes import TableId
from laredo_kernel.errors import LaredoError
from laredo_core.stream.feed import FeedMessage


class TailUnavailable(LaredoError):
    """The stream no longer holds (or never held) every message a rebuild needs; it cannot be carried out."""


def check_holds(stream: str, table: TableId, first: int, last: int, after: int, up_to: int) -> None:
    """Raise TailUnavailable unless `stream`, holding sequences `first` to `last`, still holds after+1 to up_to."""
    if last < up_to:
        raise TailUnavailable(f"stream {stream} ends at sequence {last}, before {up_to}: it was created again")
    if first > after + 1:
        raise TailUnavailable(f"stream {stream} starts at sequence {first}: the messages of {table} after {after} "
                              "were removed by its limits; use a newer snapshot")


class StreamTail(Protocol):
    """Reads what ingest published for one table between two stream sequences (JetStream in production).

    Contract:
    - `read(source_id, table, after, up_to)` yields every message of the table's subject with
      after < stream sequence <= up_to, in stream order, decoded like the service's ChangeFeed (typed or
      JSON-compatible values, fixed when the adapter is built); nothing when up_to <= after;
    - it raises TailUnavailable when the stream no longer holds the messages right after `after` (removed by
      its limits) or ends before `up_to` (it was created again): a rebuild from that snapshot is impossible;
    - a message that does not decode is logged with its stream sequence and skipped, as the feed does;
    - reading is independent of the service's live feed (its own consumer), may be slow to start (a
      connection), and stops by cancellation too; the consumer it creates is removed afterwards;
    - `aclose()` releases the connection (at shutdown); a later read connects again.
    """

    def read(self, source_id: str, table: TableId, after: int, up_to: int) -> AsyncIterator[FeedMessage]: ...

    async def aclose(self) -> None: ...
