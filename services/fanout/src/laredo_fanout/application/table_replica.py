"""One fan-out target at run time: the table's rows, its journal, readiness and change wake-ups."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from laredo_core.changes import ColumnInfo, TableId
from laredo_core.position import Position

from laredo_fanout.application.client_registry import ClientRegistry
from laredo_fanout.domain.journal import Journal
from laredo_fanout.domain.table_state import TableState
from laredo_fanout.ports import SyncEncoder


@dataclass(frozen=True, slots=True)
class ReplicaLimits:
    journal_max_entries: int
    journal_max_age: float
    heartbeat_interval: float
    max_clients: int


class TableReplica:
    """Ready once the table's baseline is complete and the feed has caught up with the stream.

    Sessions wait on `appended()` instead of polling: the replicator calls notify_appended()
    after every message that added journal entries, which wakes every waiting session at once.
    """

    def __init__(self, source_id: str, table: TableId, limits: ReplicaLimits, encoder: SyncEncoder) -> None:
        self.source_id = source_id
        self.table = table
        self.limits = limits
        self.state = TableState((), encoder.encode_row)
        self.journal = Journal(limits.journal_max_entries, limits.journal_max_age)
        self.clients = ClientRegistry(limits.max_clients)
        self.columns: tuple[ColumnInfo, ...] = ()
        self.applied_position: Position | None = None
        self.baseline_complete = False
        self.caught_up = False
        self._ready = asyncio.Event()
        self._appended = asyncio.Event()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    def mark_baseline_complete(self) -> None:
        self.baseline_complete = True
        self._update_ready()

    def mark_caught_up(self) -> None:
        self.caught_up = True
        self._update_ready()

    def appended(self) -> asyncio.Event:
        """The event the next notify_appended() sets; take it before checking the journal."""
        return self._appended

    def notify_appended(self) -> None:
        event, self._appended = self._appended, asyncio.Event()
        event.set()

    def accepts(self, position: Position) -> bool:
        """Whether a change at `position` is new: replays of applied positions are skipped."""
        return self.applied_position is None or position > self.applied_position

    def _update_ready(self) -> None:
        if self.baseline_complete and self.caught_up:
            self._ready.set()
