"""The ChangeFeed port in memory: unit tests and embedded use. Same contract as the JetStream adapter."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from laredo_kernel.changes import TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.runtime import cancel
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.feed import (ChangeSink, FeedMessage, FeedSubscription, StreamMismatch, UndecodableMessage,
                                     hand_over_undecodable)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _StoredMessage:
    stream_sequence: int
    data: bytes
    headers: dict[str, str]


class MemoryChangeFeed:
    """A JetStream stand-in: one ordered log per table, holding encoded ChangeBatch bytes.

    `json_values` as for NatsChangeFeed (typed or JSON-compatible row values).
    Faults: `stream_exists=False` makes run() wait until create_stream(); `delivery_delay`
    (seconds) is awaited before each delivery; `stalls` (table -> why) is what stalled() reports (FeedHealth).
    """

    def __init__(self, *, json_values: bool = False, stream_exists: bool = True,
                 delivery_delay: float = 0.0) -> None:
        self._json_values = json_values
        self._logs: dict[TableId, list[_StoredMessage]] = {}
        self._sequence = 0
        self.first_sequence = 1  # the oldest sequence the stream still holds (discard_through moves it)
        self._stream_exists = asyncio.Event()
        if stream_exists:
            self._stream_exists.set()
        self._published = asyncio.Event()
        self.delivery_delay = delivery_delay
        self.stalls: dict[TableId, str] = {}

    def stalled(self) -> dict[TableId, str]:
        return dict(self.stalls)

    def create_stream(self) -> None:
        self._stream_exists.set()

    @property
    def last_sequence(self) -> int:
        """The stream sequence of the newest message (0: none yet)."""
        return self._sequence

    def stored(self, table: TableId) -> list[tuple[int, bytes, dict[str, str]]]:
        """The table's retained messages as (stream sequence, data, headers), oldest first (MemoryStreamTail)."""
        return [(m.stream_sequence, m.data, m.headers) for m in self._logs.get(table, [])]

    def discard_through(self, sequence: int) -> None:
        """Fault: remove every message up to `sequence`, as JetStream's limits remove old messages."""
        self.first_sequence = max(self.first_sequence, sequence + 1)
        for table, messages in self._logs.items():
            self._logs[table] = [m for m in messages if m.stream_sequence > sequence]

    def publish(self, table: TableId, data: bytes, headers: Mapping[str, str] | None = None) -> int:
        """Append one message to the table's subject; returns its stream sequence."""
        if not self._stream_exists.is_set():
            raise RuntimeError("no stream: call create_stream() first (JetStream would not accept it)")
        self._sequence += 1
        self._logs.setdefault(table, []).append(_StoredMessage(self._sequence, data, dict(headers or {})))
        event, self._published = self._published, asyncio.Event()
        event.set()
        return self._sequence

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None:
        if not self._stream_exists.is_set():
            log.info("stream does not exist yet; waiting for it")
            await self._stream_exists.wait()
        tasks = [asyncio.create_task(self._deliver(s, sink)) for s in subscriptions]
        try:
            await asyncio.gather(*tasks)  # a sink error ends the run with that error
        finally:
            await cancel(tasks)

    async def _deliver(self, subscription: FeedSubscription, sink: ChangeSink) -> None:
        table = subscription.table
        if subscription.start_after_sequence > self._sequence:
            raise StreamMismatch("memory", self._sequence, subscription.start_after_sequence, table)
        messages = self._logs.setdefault(table, [])
        delivered = sum(1 for m in messages if m.stream_sequence <= subscription.start_after_sequence)
        caught_up_at = len(messages)
        if caught_up_at == delivered:
            sink.on_caught_up(table)
        while True:
            published = self._published
            while delivered < len(messages):
                if self.delivery_delay:
                    await asyncio.sleep(self.delivery_delay)
                self._deliver_one(subscription.source_id, table, messages[delivered], sink)
                delivered += 1
                if delivered == caught_up_at:
                    sink.on_caught_up(table)
            await published.wait()

    def _deliver_one(self, source_id: str, table: TableId, message: _StoredMessage, sink: ChangeSink) -> None:
        try:
            batch = decode_batch(message.data, json_values=self._json_values)
        except ProtocolError as exc:
            hand_over_undecodable(sink, UndecodableMessage(source_id, table, message.stream_sequence, message.data,
                                                           str(exc)), log)
            return
        sink.on_batch(FeedMessage(table, batch, message.stream_sequence, message.headers, message.data))
