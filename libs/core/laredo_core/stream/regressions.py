"""Stream positions that go backwards: counted per table and reported loudly, never skipped in silence.

Along one source's stream every change's position is greater than the one before (ingest stores messages in
order or not at all). A consumer that meets a message at or before the position it already applied skips it
(applying it would roll rows back), but that is never normal: it is a re-sent transaction stored again after
the stream's duplicate window, or a stream that lost order. Operators must hear of it, so every consumer
reports it here.
"""

from __future__ import annotations

import logging
from collections import Counter

from laredo_kernel.changes import TableId
from laredo_kernel.position import Position

log = logging.getLogger(__name__)

#: Every message is logged up to this many per table; after that one line per REPORT_EVERY messages.
LOG_FIRST = 20
REPORT_EVERY = 1000


class PositionRegressions:
    """`consumer` names who skips (e.g. "fan-out", "query") in the log lines."""

    def __init__(self, consumer: str) -> None:
        self._consumer = consumer
        self._counts: Counter[TableId] = Counter()

    def count(self, table: TableId) -> int:
        return self._counts[table]

    def report(self, table: TableId, stream_sequence: int, position: Position, applied: Position | None,
               skipped_changes: int) -> int:
        """A message of `table` at `position` (its first change, or its control position) arrived after
        `applied`; `skipped_changes` of its changes were not applied. Returns the table's count so far."""
        self._counts[table] += 1
        count = self._counts[table]
        if count <= LOG_FIRST or count % REPORT_EVERY == 0:
            log.warning(
                "%s: stream message %d of %s is at %s, at or before the position already applied (%s): "
                "%d change(s) skipped as a replay. Positions must only grow along the stream; this is a "
                "transaction stored again after the stream's duplicate window, or a stream that lost order "
                "(%d such message(s) so far; compare the table with its source, and re-baseline it with "
                "'laredo reload %s' if they differ)",
                self._consumer, stream_sequence, table, position, applied, skipped_changes, count, table)
        return count
