"""The in-memory store's command streams (consumer groups with the Redis semantics the fake must match) and its
command and event iterators (see subscriptions.py for the contract)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from laredo_core.coordination.ports import Command, Event
from laredo_core.coordination.records import command_from_json, event_from_json
from laredo_core.coordination.subscriptions import CommandSubscription, EventSubscription

if TYPE_CHECKING:
    from laredo_core.coordination.memory import InMemoryCoordinationStore


class GroupLost(Exception):
    """The consumer group or its stream vanished (the store was cleared, like a Redis restart)."""


@dataclass(slots=True)
class _Pending:
    consumer: str
    delivered_at: float


@dataclass(slots=True)
class _Group:
    last_delivered: int
    pending: dict[int, _Pending] = field(default_factory=dict)


@dataclass(slots=True)
class _Stream:
    entries: dict[int, str] = field(default_factory=dict)  # sequence -> command JSON, in append order
    last_seq: int = 0
    groups: dict[str, _Group] = field(default_factory=dict)


class MemoryStreams:
    """One stream per target; per group a read position and a pending list (consumer, delivery time).

    Mirrors XADD MAXLEN, XGROUP CREATE MKSTREAM (at 0 or $), XREADGROUP 0 / >, XAUTOCLAIM and XACK.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._streams: dict[str, _Stream] = {}

    def clear(self) -> None:
        self._streams.clear()

    def append(self, target: str, text: str, maxlen: int) -> None:
        stream = self._streams.setdefault(target, _Stream())
        stream.last_seq += 1
        stream.entries[stream.last_seq] = text
        while len(stream.entries) > maxlen:
            oldest = next(iter(stream.entries))
            del stream.entries[oldest]
            for group in stream.groups.values():
                group.pending.pop(oldest, None)

    def ensure_group(self, target: str, group: str, *, from_end: bool) -> None:
        stream = self._streams.setdefault(target, _Stream())
        if group not in stream.groups:
            stream.groups[group] = _Group(stream.last_seq if from_end else 0)

    def own_pending(self, target: str, group: str, consumer: str) -> list[tuple[int, str]]:
        """Entries delivered earlier to `consumer` and never acknowledged; their idle time restarts."""
        stream, grp = self._stream_group(target, group)
        now = self._clock()
        mine = [seq for seq, pending in grp.pending.items() if pending.consumer == consumer]
        for seq in mine:
            grp.pending[seq].delivered_at = now
        return [(seq, stream.entries[seq]) for seq in mine]

    def next_entry(self, target: str, group: str, consumer: str, claim_idle: float) -> tuple[int, str] | None:
        """Claim an entry pending for `claim_idle` seconds, else deliver the next new one, else None."""
        stream, grp = self._stream_group(target, group)
        now = self._clock()
        for seq, pending in grp.pending.items():
            if now - pending.delivered_at >= claim_idle:
                grp.pending[seq] = _Pending(consumer, now)
                return seq, stream.entries[seq]
        for seq, text in stream.entries.items():
            if seq > grp.last_delivered:
                grp.last_delivered = seq
                grp.pending[seq] = _Pending(consumer, now)
                return seq, text
        return None

    def ack(self, target: str, group: str, seq: int) -> None:
        stream = self._streams.get(target)
        grp = stream.groups.get(group) if stream is not None else None
        if grp is not None:
            grp.pending.pop(seq, None)

    def _stream_group(self, target: str, group: str) -> tuple[_Stream, _Group]:
        stream = self._streams.get(target)
        grp = stream.groups.get(group) if stream is not None else None
        if stream is None or grp is None:
            raise GroupLost(f"consumer group {group!r} of {target!r} is gone")
        return stream, grp


class MemoryCommandSubscription(CommandSubscription):
    def __init__(self, store: InMemoryCoordinationStore, target: str, consumer: str, group: str | None) -> None:
        super().__init__(target, consumer, group)
        self._store = store

    async def _create_group(self) -> None:
        await self._store.ensure_reachable()
        self._store.streams.ensure_group(self.target, self.group, from_end=self.from_end)

    async def _own_pending(self) -> list[Command]:
        await self._store.ensure_reachable()
        try:
            entries = self._store.streams.own_pending(self.target, self.group, self.consumer)
        except GroupLost:
            self.group_lost()
            return []
        return [self._delivered(seq, text) for seq, text in entries]

    async def _fetch(self) -> list[Command]:
        await self._store.ensure_reachable()
        try:
            entry = self._store.streams.next_entry(self.target, self.group, self.consumer, self._store.claim_idle)
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
    """Buffers up to the store's `event_buffer` events; further ones are dropped, as Redis disconnects a
    subscriber that falls too far behind."""

    def __init__(self, store: InMemoryCoordinationStore) -> None:
        super().__init__()
        self._store = store
        self._queue: deque[str] = deque()
        self._arrived = asyncio.Event()

    def offer(self, text: str) -> None:
        if len(self._queue) < self._store.event_buffer:
            self._queue.append(text)
            self._arrived.set()

    async def _subscribe(self) -> None:
        await self._store.ensure_reachable()
        self._store.watchers.add(self)

    async def _unsubscribe(self) -> None:
        self._store.watchers.discard(self)
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
