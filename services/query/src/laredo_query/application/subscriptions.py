"""Subscribe streams: one bounded buffer per subscriber that never blocks the change stream.

The applier offers every event to every subscriber of the table synchronously; a subscriber whose buffer
is full loses the event (OverflowPolicy.DROP, the specification's behaviour, counted in `dropped`) or is
ended (OverflowPolicy.CLOSE: the client resubscribes with replay_existing and starts consistent again).
Subscribers wait on an event, never by polling.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from collections.abc import Iterable

from laredo_query.domain.errors import SubscriberOverflowed, SubscriptionEnded
from laredo_query.domain.events import ChangeEvent

log = logging.getLogger(__name__)

DEFAULT_BUFFER_SIZE = 256


class OverflowPolicy(enum.Enum):
    DROP = "drop"
    CLOSE = "close"


class Subscription:
    """One subscriber's buffer: `offer` never blocks; `next` waits for the next event."""

    def __init__(self, table: str, number: int, capacity: int, policy: OverflowPolicy) -> None:
        self.table = table
        self.number = number
        self.capacity = capacity
        self.policy = policy
        self.dropped = 0
        self.delivered = 0
        self._buffer: deque[ChangeEvent] = deque()
        self._wakeup = asyncio.Event()
        self._ended: SubscriptionEnded | None = None

    def __len__(self) -> int:
        return len(self._buffer)

    @property
    def ended(self) -> bool:
        return self._ended is not None

    def offer(self, event: ChangeEvent) -> None:
        if self._ended is not None:
            return
        if len(self._buffer) >= self.capacity:
            self._overflow()
            return
        self._buffer.append(event)
        self._wakeup.set()

    def end(self, error: SubscriptionEnded) -> None:
        """End the stream: the next call to next() raises `error` (buffered events are discarded)."""
        if self._ended is None:
            self._ended = error
            self._wakeup.set()

    async def next(self) -> ChangeEvent:
        while True:
            if self._ended is not None:
                raise self._ended
            if self._buffer:
                self.delivered += 1
                return self._buffer.popleft()
            self._wakeup.clear()
            await self._wakeup.wait()

    def _overflow(self) -> None:
        if self.policy is OverflowPolicy.CLOSE:
            self.end(SubscriberOverflowed(
                f"subscriber {self.number} of {self.table} fell behind: its {self.capacity}-event buffer "
                "overflowed; subscribe again with replay_existing=true to start from a consistent state"))
            return
        self.dropped += 1
        if self.dropped == 1:
            log.warning("%s: subscriber %d reads too slowly; its %d-event buffer is full, so live events "
                        "are dropped (counted) until it catches up", self.table, self.number, self.capacity)


class SubscriberHub:
    """The subscribers of one table."""

    def __init__(self, table: str, capacity: int = DEFAULT_BUFFER_SIZE,
                 policy: OverflowPolicy = OverflowPolicy.DROP) -> None:
        self.table = table
        self.capacity = capacity
        self.policy = policy
        self._subscribers: dict[Subscription, None] = {}
        self._opened = 0
        self._dropped_by_closed = 0

    def __len__(self) -> int:
        return len(self._subscribers)

    @property
    def dropped(self) -> int:
        """Events dropped for this table's subscribers, past and present."""
        return self._dropped_by_closed + sum(s.dropped for s in self._subscribers)

    def open(self) -> Subscription:
        self._opened += 1
        subscription = Subscription(self.table, self._opened, self.capacity, self.policy)
        self._subscribers[subscription] = None
        return subscription

    def close(self, subscription: Subscription) -> None:
        if self._subscribers.pop(subscription, 0) is None:
            self._dropped_by_closed += subscription.dropped
            if subscription.dropped:
                log.warning("%s: subscriber %d left after %d events delivered and %d dropped", self.table,
                            subscription.number, subscription.delivered, subscription.dropped)

    def publish(self, events: Iterable[ChangeEvent]) -> None:
        subscribers = list(self._subscribers)
        for event in events:
            for subscription in subscribers:
                subscription.offer(event)

    def end_all(self, error: SubscriptionEnded) -> None:
        for subscription in self._subscribers:
            subscription.end(error)
