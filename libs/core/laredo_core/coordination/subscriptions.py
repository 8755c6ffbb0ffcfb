"""Outage-proof async iterators over commands and events, shared by the Redis adapter and the fake.

Contract of both iterators (what `CoordinationStore.commands()` and `.events()` return):
- They never raise CoordinationUnavailable. During an outage they wait quietly (one warning when it starts,
  one info line when it ends) and continue when the store is back; a command consumer re-creates its group
  if the server lost it. Callers therefore need one `async for` loop, not a retry loop of their own.
- `join()` subscribes now and raises CoordinationUnavailable if it cannot. Iteration joins implicitly; call
  it yourself before announcing readiness when a command or event sent right afterwards must not be missed
  (a broadcast group and an event watcher only see what is sent after they joined).
- `aclose()` ends the iteration within one blocking period (`block` seconds of the store).
"""

from __future__ import annotations

import abc
import logging
from collections import deque

from laredo_core.coordination.outage import OutageLog
from laredo_core.coordination.ports import Command, CoordinationUnavailable, Event
from laredo_core.coordination.records import check_name

logger = logging.getLogger(__name__)


class CommandSubscription(abc.ABC):
    """The commands for one target as one consumer of one consumer group; see the module docstring.

    Delivery: each entry goes to one consumer of the group; an entry not acknowledged (complete_command)
    within the store's `claim_idle` seconds is handed again to whichever consumer of the group asks next,
    the same one included. A consumer that restarts under the same name first gets back what it left pending.
    """

    def __init__(self, target: str, consumer: str, group: str | None) -> None:
        self.target = check_name("command target", target)
        self.consumer = check_name("consumer name", consumer)
        self.group = check_name("consumer group", group or target)
        # The target's own group reads its stream from the start, so commands sent while no consumer ran
        # wait for one; a caller-named group (one per broadcast reader) only sees commands sent after it
        # joined, so a new instance does not replay old broadcasts.
        self.from_end = self.group != target
        self.joined = False
        self._closed = False
        self._backlog: deque[Command] = deque()
        self._outage = OutageLog(logger, f"commands for {target!r} (consumer {consumer}, group {self.group})")

    def __aiter__(self) -> CommandSubscription:
        return self

    async def __anext__(self) -> Command:
        while not self._closed:
            if self._backlog:
                return self._backlog.popleft()
            try:
                await self.join()
                if not self._backlog:  # joining may have taken back pending entries
                    self._backlog.extend(await self._fetch())
                self._outage.succeeded()
            except CoordinationUnavailable as exc:
                self._outage.failed(exc)
                await self._pause_after_failure()
        raise StopAsyncIteration

    async def join(self) -> None:
        """Create the consumer group if needed and take back entries this consumer left unacknowledged."""
        if self.joined:
            return
        await self._create_group()
        self._backlog.extend(await self._own_pending())
        self.joined = True

    async def aclose(self) -> None:
        """Stop iterating; commands delivered but not completed are redelivered after `claim_idle`."""
        self._closed = True

    def group_lost(self) -> None:
        """The server lost the group (e.g. a restart without persistence): join again on the next fetch.

        The new group reads the stream from where this consumer last read (from the start if it read
        nothing), so commands sent to the recreated stream before the group came back are not missed.
        """
        self.joined = False
        self.from_end = False

    @abc.abstractmethod
    async def _create_group(self) -> None: ...

    @abc.abstractmethod
    async def _own_pending(self) -> list[Command]: ...

    @abc.abstractmethod
    async def _fetch(self) -> list[Command]:
        """Claim stale entries or read new ones, waiting at most one blocking period; [] if none."""

    @abc.abstractmethod
    async def _pause_after_failure(self) -> None: ...


class EventSubscription(abc.ABC):
    """Events published while this watcher is subscribed, in publication order; see the module docstring."""

    def __init__(self) -> None:
        self._joined = False
        self._closed = False
        self._receiving = False
        self._outage = OutageLog(logger, "event watcher")

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> Event:
        self._receiving = True
        try:
            while not self._closed:
                try:
                    await self.join()
                    event = await self._receive()
                except CoordinationUnavailable as exc:
                    self._outage.failed(exc)
                    self._joined = False
                    await self._unsubscribe()
                    await self._pause_after_failure()
                    continue
                self._outage.succeeded()
                if event is not None:
                    return event
            raise StopAsyncIteration
        finally:
            self._receiving = False
            if self._closed:  # aclose() during a receive left the unsubscribing to this task
                await self._unsubscribe()

    async def join(self) -> None:
        """Subscribe now (idempotent); events published from then on are delivered."""
        if self._joined:
            return
        await self._subscribe()
        self._joined = True

    async def aclose(self) -> None:
        """Stop iterating; a receive in progress ends within one blocking period."""
        self._closed = True
        self._joined = False
        if not self._receiving:
            await self._unsubscribe()

    @abc.abstractmethod
    async def _subscribe(self) -> None: ...

    @abc.abstractmethod
    async def _unsubscribe(self) -> None:
        """Drop the subscription; never raises."""

    @abc.abstractmethod
    async def _receive(self) -> Event | None:
        """The next event, or None after one blocking period without one."""

    @abc.abstractmethod
    async def _pause_after_failure(self) -> None: ...
