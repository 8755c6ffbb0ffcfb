"""In-memory CoordinationStore with injectable faults: the fake for unit tests and the single-process mode.

It keeps the Redis adapter's semantics (see redis_store.py: the same JSON forms, consumer groups, idle-time
redelivery, first result wins), so the contract tests run unchanged on both.

Faults: `unavailable = True` makes every call raise CoordinationUnavailable (iterators pause quietly and go
on when it is reset), `delay` makes every call wait that many seconds first, `clock` is the TTL clock (pass a
ManualClock and `advance()` it), and `clear()` loses every record like a Redis restart without persistence.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from laredo_core.coordination.memory_streams import MemoryCommandSubscription, MemoryEventSubscription, MemoryStreams
from laredo_core.coordination.ports import (Command, CommandKind, CommandResult, CoordinationUnavailable, Event,
                                            InstanceStatus)
from laredo_core.coordination.records import (check_name, command_to_json, event_to_json, finished_result,
                                              instance_from_json, instance_to_json, new_command, positive_seconds,
                                              result_from_json, result_to_json)

__all__ = ["InMemoryCoordinationStore", "ManualClock", "MemoryCommandSubscription", "MemoryEventSubscription"]

DeliveryKey = tuple[str, str, int]  # target, group, entry sequence


class ManualClock:
    """A clock that moves only when told to: `clock.advance(seconds)`. Unix seconds, like time.time."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class InMemoryCoordinationStore:
    """CoordinationStore kept in this process; see the module docstring for faults and semantics."""

    def __init__(self, *, clock: Callable[[], float] | None = None, claim_idle: float = 30.0, block: float = 1.0,
                 result_ttl: float = 3600.0, stream_maxlen: int = 10_000, event_buffer: int = 1024) -> None:
        self.clock = clock or time.time
        self.claim_idle = claim_idle
        self.block = block
        self.result_ttl = result_ttl
        self.stream_maxlen = stream_maxlen
        self.event_buffer = event_buffer
        self.delay = 0.0
        self._unavailable = False
        self._instances: dict[tuple[str, str], tuple[str, float]] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self.streams = MemoryStreams(lambda: self.clock())  # the subscriptions call ensure_reachable() first
        self._results: dict[str, tuple[str, float]] = {}
        self._deliveries: dict[str, dict[DeliveryKey, None]] = {}
        self.watchers: set[MemoryEventSubscription] = set()  # the subscriptions add and remove themselves
        self._changed = asyncio.Event()

    @property
    def unavailable(self) -> bool:
        return self._unavailable

    @unavailable.setter
    def unavailable(self, value: bool) -> None:
        self._unavailable = value
        self._notify()

    def clear(self) -> None:
        """Forget every record, stream, group and result, as a Redis restart without persistence does.

        What this store object delivered stays tracked, as a Redis client's memory survives the restart.
        """
        self._instances.clear()
        self._leases.clear()
        self.streams.clear()
        self._results.clear()
        self._notify()

    # Registry

    async def heartbeat(self, instance: InstanceStatus, ttl: float) -> None:
        await self.ensure_reachable()
        check_name("service", instance.service)
        check_name("instance id", instance.instance_id)
        stamped = replace(instance, heartbeat_unix_ms=instance.heartbeat_unix_ms or self._now_ms())
        key = (instance.service, instance.instance_id)
        self._instances[key] = (instance_to_json(stamped), self.clock() + positive_seconds("ttl", ttl))

    async def deregister(self, service: str, instance_id: str) -> None:
        await self.ensure_reachable()
        self._instances.pop((service, instance_id), None)

    async def instances(self, service: str | None = None) -> list[InstanceStatus]:
        await self.ensure_reachable()
        now = self.clock()
        for key in [k for k, (_, expires_at) in self._instances.items() if expires_at <= now]:
            del self._instances[key]
        found = [instance_from_json(text) for (svc, _), (text, _) in self._instances.items()
                 if service is None or svc == service]
        return sorted(found, key=lambda i: (i.service, i.instance_id))

    # Leases

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> bool:
        await self.ensure_reachable()
        if self._live(self._leases, check_name("lease name", name)) not in (None, holder):
            return False
        self._leases[name] = (check_name("lease holder", holder), self.clock() + positive_seconds("ttl", ttl))
        return True

    async def renew_lease(self, name: str, holder: str, ttl: float) -> bool:
        await self.ensure_reachable()
        if self._live(self._leases, name) != holder:
            return False
        self._leases[name] = (holder, self.clock() + positive_seconds("ttl", ttl))
        return True

    async def release_lease(self, name: str, holder: str) -> None:
        await self.ensure_reachable()
        if self._live(self._leases, name) == holder:
            del self._leases[name]

    async def lease_holder(self, name: str) -> str | None:
        await self.ensure_reachable()
        return self._live(self._leases, name)

    # Commands

    async def send_command(self, target: str, kind: CommandKind, args: Mapping[str, Any] | None = None) -> str:
        await self.ensure_reachable()
        command = new_command(target, kind, args, self._now_ms())
        self.streams.append(target, command_to_json(command), self.stream_maxlen)
        self._notify()
        return command.command_id

    def commands(self, target: str, consumer: str, *, group: str | None = None) -> MemoryCommandSubscription:
        return MemoryCommandSubscription(self, target, consumer, group)

    async def complete_command(self, command: Command, result: CommandResult) -> None:
        await self.ensure_reachable()
        text = result_to_json(finished_result(command, result, self._now_ms()))
        if self._live(self._results, command.command_id) is None:
            self._results[command.command_id] = (text, self.clock() + self.result_ttl)
        self._ack_one_delivery(command.command_id)
        self._notify()

    async def command_result(self, command_id: str, timeout: float) -> CommandResult | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await self.ensure_reachable()
            text = self._live(self._results, command_id)
            if text is not None:
                return result_from_json(text)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await self.wait_for_change(remaining)

    def _live(self, records: dict[str, tuple[str, float]], key: str) -> str | None:
        """The record under `key` unless its ttl lapsed (then it is dropped)."""
        value, expires_at = records.get(key, (None, 0.0))
        if value is not None and expires_at <= self.clock():
            del records[key]
            return None
        return value

    # Events

    async def publish_event(self, event: Event) -> None:
        await self.ensure_reachable()
        text = event_to_json(replace(event, unix_ms=event.unix_ms or self._now_ms()))
        for watcher in list(self.watchers):
            watcher.offer(text)

    def events(self) -> MemoryEventSubscription:
        return MemoryEventSubscription(self)

    # Used by the subscriptions (memory_streams.py)

    async def ensure_reachable(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self._unavailable:
            raise CoordinationUnavailable("in-memory coordination store is set unavailable (test fault)")

    async def wait_for_change(self, timeout: float) -> None:
        """Wait until any record changes or `timeout` seconds pass, whichever comes first."""
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await changed.wait()

    def track_delivery(self, command_id: str, key: DeliveryKey) -> None:
        self._deliveries.setdefault(command_id, {})[key] = None

    def _ack_one_delivery(self, command_id: str) -> None:
        deliveries = self._deliveries.get(command_id)
        if not deliveries:
            return
        key = next(iter(deliveries))
        del deliveries[key]
        if not deliveries:
            del self._deliveries[command_id]
        self.streams.ack(*key)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)
