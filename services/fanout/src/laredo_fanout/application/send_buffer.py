"""The short queue of serialized messages between a Sync session's producer and the task writing to its client.

One producer, one consumer, at most `read_ahead` messages (the one being written included): the entries a client
has yet to receive wait in the shared journal (the session's cursor marks where), so a batched client gets
whatever piled up while its previous message was being written, in one message. `depth` counts the journal
entries (or snapshot rows) in the queued messages, the one being written included; `journal_depth` the journal
entries alone (a client's lag, see domain.client_buffer.client_lag).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from laredo_fanout.domain.journal import JournalEntry


@dataclass(slots=True)
class Outgoing:
    """One message for the client. `last_sequence`: the client's sequence once it is written."""

    message: bytes
    entries: int = 0
    last_sequence: int | None = None
    journal: Sequence[JournalEntry] = ()


class SendBuffer:
    def __init__(self, read_ahead: int) -> None:
        self.read_ahead = max(1, read_ahead)
        self.depth = 0
        self.journal_depth = 0
        self._items: deque[Outgoing] = deque()
        self._writing = 0  # messages taken by the writer and not written yet
        self._getter: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # taken once: each lookup costs a getpid() call

    def _new_future(self) -> asyncio.Future[None]:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop.create_future()

    def __len__(self) -> int:
        return len(self._items) + self._writing

    def has_room(self) -> bool:
        return len(self) < self.read_ahead

    def room(self) -> asyncio.Future[None]:
        """Resolved once a message was written (there may be room then); shared by every caller."""
        if self._room is None or self._room.done():
            self._room = self._new_future()
            if self.has_room():
                self._room.set_result(None)
        return self._room

    def push(self, item: Outgoing) -> None:
        """Queue the item whatever the length (control messages the client must get, e.g. GoAway)."""
        self._items.append(item)
        self.depth += item.entries
        self.journal_depth += len(item.journal)
        _wake(self._getter)

    def offer(self, item: Outgoing) -> bool:
        """Queue the item if there is room; False (nothing queued) otherwise."""
        if not self.has_room():
            return False
        self.push(item)
        return True

    async def get(self) -> Outgoing:
        """The next item to write (waits for one)."""
        while not self._items:
            self._getter = self._new_future()
            try:
                await self._getter
            finally:
                self._getter = None
        self._writing += 1
        return self._items.popleft()

    def written(self, item: Outgoing) -> None:
        """The item reached the transport."""
        self._writing -= 1
        self.depth -= item.entries
        self.journal_depth -= len(item.journal)
        _wake(self._room)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


async def first_done(futures: Sequence[asyncio.Future[Any]], timeout: float | None = None) -> bool:
    """Wait until one of `futures` is done or `timeout` seconds passed, never cancelling them (they may be shared
    by every session); True when one is done. What asyncio.wait(FIRST_COMPLETED) does, at a quarter of its cost:
    a session waits like this for every message it sends."""
    for future in futures:
        if future.done():
            return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    for future in futures:
        future.add_done_callback(wake)
    timer = loop.call_later(max(0.0, timeout), wake) if timeout is not None else None
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
        for future in futures:
            future.remove_done_callback(wake)
    return any(future.done() for future in futures)
