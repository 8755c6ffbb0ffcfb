"""In-memory fakes of OAM's ports: the coordination store fake shared with the other services, a change tail."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from laredo_kernel.changes import TableId
from laredo_core.coordination.memory import InMemoryCoordinationStore, ManualClock

from laredo_oam.domain.watch import ObservedChange
from laredo_oam.ports import ChangeSink, TailTopic

__all__ = ["InMemoryCoordinationStore", "ManualClock", "MemoryChangeTail"]


class MemoryChangeTail:
    """ChangeTail in memory: `publish()` hands changes to a running tail when a followed topic covers them.

    Same contract as NatsChangeTail minus the stream: what is published while nobody follows is lost.
    `followed` is the current topic set, `runs` counts run() calls (a tail runs only while watched).
    """

    def __init__(self) -> None:
        self.followed: frozenset[TailTopic] = frozenset()
        self.runs = 0
        self._sink: ChangeSink | None = None

    @property
    def running(self) -> bool:
        return self._sink is not None

    def follow(self, topics: frozenset[TailTopic]) -> None:
        self.followed = topics

    async def run(self, sink: ChangeSink) -> None:
        self.runs += 1
        self._sink = sink
        try:
            await asyncio.Future()  # until cancelled
        finally:
            self._sink = None

    def covers(self, source_id: str, table: TableId) -> bool:
        return TailTopic(source_id) in self.followed or TailTopic(source_id, table) in self.followed

    def publish(self, changes: Sequence[ObservedChange]) -> bool:
        """Deliver one message's changes (all of one source and table); False when nobody follows them."""
        if self._sink is None or not changes or not self.covers(changes[0].source_id, changes[0].table):
            return False
        self._sink(list(changes))
        return True
