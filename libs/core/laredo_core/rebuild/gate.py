"""A ChangeSink in front of a service's own that can hold one table's live messages while a rebuild installs.

While a table is held, its messages (and its caught-up signal) wait in a bounded buffer instead of reaching
the service's sink; `release()` hands them over in order, synchronously, so nothing is lost or reordered and
the live table continues exactly where the rebuild left it. The buffer never exceeds `limit` messages: the
message that would exceed it first calls the hold's `on_full` (which must finish, synchronously, whatever
needed the hold, e.g. the rest of an install) or, without one, marks the hold `overflowed` (the rebuild
gives up); then the hold is released and that message follows the held ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from laredo_kernel.changes import TableId
from laredo_core.stream.feed import ChangeSink, FeedMessage, UndecodableMessage, hand_over_undecodable

log = logging.getLogger(__name__)

_CAUGHT_UP = object()  # stands for an on_caught_up call that arrived while held


class Hold:
    """The held messages of one table; see the module docstring."""

    def __init__(self, table: TableId, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a hold must be able to keep at least one message, got limit {limit}")
        self.table = table
        self.limit = limit
        self.on_full: Callable[[], None] | None = None
        self.overflowed = False
        self.released = False
        self.held: list[FeedMessage | object] = []


class GatedSink:
    """The feed's sink: passes everything to `inner` except the messages of held tables."""

    def __init__(self, inner: ChangeSink) -> None:
        self._inner = inner
        self._holds: dict[TableId, Hold] = {}
        self._applied: dict[TableId, int] = {}

    def on_batch(self, message: FeedMessage) -> None:
        hold = self._holds.get(message.table)
        if hold is None:
            self._deliver(message)
            return
        if len(hold.held) >= hold.limit:
            self._overflow(hold)
            self._deliver(message)  # the hold ended: in order after the held ones
            return
        hold.held.append(message)

    def on_undecodable(self, message: UndecodableMessage) -> None:
        """Passed on at once (it changes no row): the service's sink keeps it as a dead letter."""
        hand_over_undecodable(self._inner, message, log)

    def applied_sequence(self, table: TableId) -> int:
        """The stream sequence of the last message of `table` handed to the service's sink (0: none yet)."""
        return self._applied.get(table, 0)

    def started_after(self, table: TableId, sequence: int) -> None:
        """The table was loaded from a snapshot: its messages up to `sequence` count as applied."""
        self._applied[table] = max(self._applied.get(table, 0), sequence)

    def on_caught_up(self, table: TableId) -> None:
        hold = self._holds.get(table)
        if hold is None:
            self._inner.on_caught_up(table)
        else:
            hold.held.append(_CAUGHT_UP)

    def held(self, table: TableId) -> bool:
        return table in self._holds

    def hold(self, table: TableId, limit: int) -> Hold:
        """Hold `table`'s messages from now on; call release() (in a finally) when done."""
        if table in self._holds:
            raise RuntimeError(f"{table} is held already: one rebuild per table at a time")
        hold = self._holds[table] = Hold(table, limit)
        return hold

    def release(self, hold: Hold) -> None:
        """Hand the held messages to the service's sink in order, and stop holding (idempotent)."""
        if hold.released:
            return
        hold.released = True
        if self._holds.get(hold.table) is hold:
            del self._holds[hold.table]
        held, hold.held = hold.held, []
        for item in held:
            if item is _CAUGHT_UP:
                self._inner.on_caught_up(hold.table)
            else:
                assert isinstance(item, FeedMessage)
                self._deliver(item)

    def _deliver(self, message: FeedMessage) -> None:
        self._inner.on_batch(message)
        self._applied[message.table] = message.stream_sequence

    def _overflow(self, hold: Hold) -> None:
        log.warning("%s: %d live messages arrived while a rebuild held the table; %s", hold.table, hold.limit,
                    "finishing its install now" if hold.on_full else "giving the rebuild up")
        if hold.on_full is not None:
            hold.on_full()
        else:
            hold.overflowed = True
        self.release(hold)
