"""One indexed-memory target at run time: its rows and indexes, stream progress, readiness, subscribers."""

from __future__ import annotations

import asyncio
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.deadletters.key_watch import KeyWatch
from laredo_kernel.position import Position
from laredo_kernel.table_replay import AppliedCounts

from laredo_query.application.subscriptions import SubscriberHub
from laredo_query.domain.indexed_table import IndexedTable


class ReadinessSignal:
    """Wakes whoever mirrors readiness (gRPC health) whenever a table's readiness changed."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def changed(self) -> asyncio.Event:
        """The event the next notify() sets; take it before reading readiness."""
        return self._event

    def notify(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()


class QueryTable:
    """Loaded once a baseline is complete and the feed has caught up with the stream as it was at start; from then
    on it answers queries (`serving`). It is ready while it is loaded, its indexes fit its columns and the source
    has not reported a loss of continuity that no baseline has repaired since."""

    def __init__(self, source_id: str, table: TableId, indexed: IndexedTable, subscribers: SubscriberHub,
                 signal: ReadinessSignal) -> None:
        self.source_id = source_id
        self.table, self.name = table, str(table)
        self.indexed = indexed
        self.subscribers = subscribers
        self.applied_position: Position | None = None
        self.baseline_complete = False
        self.caught_up = False
        self.serving = False
        self.stale_reason = ""
        self.skipped_changes = 0
        self.position_regressions = 0  # messages at or before the applied position (see PositionRegressions)
        self.dead_letters = 0  # changes (or messages) of the stream this instance could not apply
        self.applied = AppliedCounts()  # changes of transactions applied since this instance started
        self.watch = KeyWatch()  # rows changed after a rejected change (replays skip what was overtaken)
        self.baselines_completed = 0
        self.reads = 0  # Lookup, LookupAll, GetRow, ListRows and CountRows served
        self._signal = signal
        self._was_ready = False

    @property
    def loaded(self) -> bool:
        return self.baseline_complete and self.caught_up

    @property
    def ready(self) -> bool:
        return self.loaded and not self.stale_reason and not self.indexed.problems

    def mark_baseline_complete(self) -> None:
        self.baseline_complete = True
        self.baselines_completed += 1
        self.stale_reason = ""
        self.update_readiness()

    def mark_caught_up(self) -> None:
        self.caught_up = True
        self.update_readiness()

    def mark_stale(self, reason: str) -> None:
        self.stale_reason = reason
        self.update_readiness()

    def update_readiness(self) -> None:
        if self.loaded:
            self.serving = True
        ready = self.ready
        if ready != self._was_ready:
            self._was_ready = ready
            self._signal.notify()

    def status(self) -> dict[str, Any]:
        """Readiness details for /health/ready and logs."""
        when_set = {"problems": self.indexed.problems, "stale": self.stale_reason,
                    "skipped_changes": self.skipped_changes, "dead_letters": self.dead_letters,
                    "position_regressions": self.position_regressions}
        return {"ready": self.ready, "baseline_complete": self.baseline_complete, "caught_up": self.caught_up,
                "rows": len(self.indexed), "position": str(self.applied_position or ""),
                "indexes": self.indexed.index_stats(), "applied": self.applied.report(),
                "subscribers": len(self.subscribers), "subscriber_events_dropped": self.subscribers.dropped,
                **{key: value for key, value in when_set.items() if value}}
