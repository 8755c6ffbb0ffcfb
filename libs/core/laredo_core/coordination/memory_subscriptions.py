"""Command and event iterators of the in-memory coordination store (see subscriptions.py for the contract)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from laredo_core.coordination.memory_streams import GroupLost
from laredo_core.coordination.ports import Command, Event
from laredo_core.coordination.records import command_from_json, event_from_json
from laredo_core.coordination.subscriptions import CommandSubscription, EventSubscription

if TYPE_CHECKING:
    from laredo_core.coordination.memory import InMemoryCoordinationStore


class MemoryCommandSubscription(CommandSubscription):
    def __init__(self, store: InMemoryCoordinationStore, target: str, consumer: str, group: str | None) -> None:
        super().__init__(target, consumer, group)
        self._store = store

    async def _create_group(self) -> None:
        await self._store.ensure_group(self.target, self.group, from_end=self.from_end)

    async def _own_pending(self) -> list[Command]:
        try:
            entries = await self._store.own_pending(self.target, self.group, self.consumer)
        except GroupLost:
            self.group_lost()
            return []
        return [self._delivered(seq, text) for seq, text in entries]

    async def _fetch(self) -> list[Command]:
        try:
            entry = await self._store.next_entry(self.target, self.group, self.consumer)
        except GroupLost:
            self.group_lost()
            return []
        if entry is None:
            await self._store.wait_for_change(self._store.block)
            return []
        return [self._delivered(*entry)]

    async def _pause_after_failure(self) -> None:
        await self._store.wait_for_change(self._store.block)

    def _delivered(self, seq: int, text: str) -> Command:
        command = command_from_json(text)
        self._store.track_delivery(command.command_id, (self.target, self.group, seq))
        return command


class MemoryEventSubscription(EventSubscription):
    """Buffers up to the store's `event_buffer` events; further ones are dropped and counted
    (`store.dropped_events`), as Redis disconnects a subscriber that falls too far behind."""

    def __init__(self, store: InMemoryCoordinationStore) -> None:
        super().__init__()
        self._store = store
        self._queue: deque[str] = deque()
        self._arrived = asyncio.Event()

    def offer(self, text: str) -> None:
        if len(self._queue) >= self._store.event_buffer:
            self._store.dropped_events += 1
            return
        self._queue.append(text)
        self._arrived.set()

    async def _subscribe(self) -> None:
        await self._store.ensure_reachable()
        self._store.add_watcher(self)

    async def _unsubscribe(self) -> None:
        self._store.remove_watcher(self)
        self._arrived.set()  # wake a receive in progress so it sees the close

    async def _receive(self) -> Event | None:
        if not self._queue:
            self._arrived.clear()
            try:
                async with asyncio.timeout(self._store.block):
                    await self._arrived.wait()
            except TimeoutError:
                return None
        return event_from_json(self._queue.popleft()) if self._queue else None

    async def _pause_after_failure(self) -> None:
        await self._store.wait_for_change(self._store.block)
