"""The status heartbeat every instance runs against the CoordinationStore, with immediate reports of state changes."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from laredo_core.coordination.lease import LeaderLease
from laredo_core.coordination.outage import OutageLog
from laredo_core.coordination.ports import CoordinationStore, CoordinationUnavailable, InstanceStatus
from laredo_core.coordination.records import check_name, to_json
from laredo_core.coordination.status_reports import instance_status_event
from laredo_core.redaction import scrub_tree
from laredo_core.runtime import cancel

__all__ = ["InstanceHeartbeat", "LeaderLease", "OUTAGE_RETRY", "POKE_BACKLOG"]

logger = logging.getLogger(__name__)

#: Poked statuses that may wait for the store at once (the oldest are dropped beyond this).
POKE_BACKLOG = 16
#: Seconds between heartbeat attempts while the store is unreachable (at most the interval).
OUTAGE_RETRY = 1.0

StatusFn = Callable[[], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]


class InstanceHeartbeat:
    """Stores this instance's status every `interval` seconds with a `ttl`, for as long as `run()` runs.

    `run()` never raises except CancelledError: coordination must never stop a service that moves data. An
    unreachable store logs once per outage (and is retried every OUTAGE_RETRY seconds); a `status_fn` that fails
    or returns something not JSON-compatible logs once and is reported as `{"status_error": ...}`, so the
    instance stays visible; any other error of a heartbeat is logged once per run of failures.

    Every stored record gets a stamp (`heartbeat_unix_ms`, wall-clock milliseconds) that increases strictly per
    instance, and writes are serialized, so the store never holds an older status after a newer one and
    watchers can order records. `started_unix_ms` is when this heartbeat was set up (OAM's GetStatus
    `started_at`).
    """

    def __init__(self, store: CoordinationStore, service: str, instance_id: str, status_fn: StatusFn,
                 interval: float = 5.0, ttl: float = 15.0, *, clock: Callable[[], float] = time.time) -> None:
        if not 0 < interval < ttl:
            raise ValueError(f"heartbeat interval ({interval}s) must be positive and below its ttl ({ttl}s), "
                             "or the instance would expire between heartbeats; use a ttl of about 3 intervals")
        self.service = check_name("service", service)
        self.instance_id = check_name("instance id", instance_id)
        self.interval = interval
        self.ttl = ttl
        self._store = store
        self._status_fn = status_fn
        self._clock = clock
        self.started_unix_ms = int(clock() * 1000)
        self._store_outage = OutageLog(logger, f"heartbeat of {service} instance {instance_id}")
        self._status_failing = False
        self._beat_failing = False
        self._poke_failing = False
        self._running = False
        self._last_stamp = 0
        self._writing = asyncio.Lock()
        # Statuses poked but not stored yet, oldest first; when the store is slower than the changes, the
        # oldest are dropped (a watcher then misses intermediate states, never the latest one).
        # None stands for "the status at the time of storing" (an asynchronous status function).
        self._poked: deque[Mapping[str, Any] | None] = deque(maxlen=POKE_BACKLOG)
        self._poker: asyncio.Task[None] | None = None

    async def run(self) -> None:
        self._running = True
        try:
            stored = False
            while True:
                # The first beat, and the first after an outage, is announced like a poke: the instance
                # (re)appears for watchers at once.
                announce, stored = not stored, False
                try:
                    stored = await self.beat(announce=announce)
                    self._beat_failing = False
                except Exception:  # noqa: BLE001 - logged; the next beat may succeed, data must keep flowing
                    if not self._beat_failing:
                        logger.exception("heartbeat of %s instance %s failed unexpectedly; retrying every %gs",
                                         self.service, self.instance_id, self.interval)
                    self._beat_failing = True
                # While the store is unreachable, retry sooner: the instance is listed again (with what it
                # reported meanwhile) about a second after the store is back, e.g. after an empty restart.
                await asyncio.sleep(self.interval if stored else min(self.interval, OUTAGE_RETRY))
        finally:
            self._running = False
            if self._poker is not None:
                self._poker.cancel()

    async def beat(self, *, announce: bool = False) -> bool:
        """Store the current status once (after any poked status still waiting), and publish it as an
        `instance_status` event if `announce`; False if the store is unreachable."""
        async with self._writing:
            while self._poked:
                if not await self._store_next_poked():
                    return False
            return await self._store_status(await self._resolve(None), announce=announce)

    def poke(self) -> None:
        """Store and announce the status now, because the instance's state just changed.

        Never blocks: the status is taken at once (a synchronous `status_fn` is called here), then stored and
        published as an `instance_status` event by a background task, in poke order. Identical consecutive
        statuses are coalesced; at most POKE_BACKLOG wait (the oldest are dropped); an unreachable store drops
        what waits, since the next heartbeat stores the current status anyway. Before `run()` starts, pokes
        wait for its first heartbeat.
        """
        status = self._status_now()
        if self._poked and self._poked[-1] == status:
            return
        self._poked.append(status)
        if self._running and (self._poker is None or self._poker.done()):
            self._poker = asyncio.get_running_loop().create_task(
                self._store_poked(), name=f"heartbeat-poke:{self.service}:{self.instance_id}")

    async def deregister(self) -> None:
        """Remove this instance from the registry now (clean shutdown); an unreachable store is ignored,
        the entry then expires after its ttl."""
        poker, self._poker = self._poker, None
        self._poked.clear()
        await cancel([poker])
        try:
            await self._store.deregister(self.service, self.instance_id)
        except CoordinationUnavailable as exc:
            logger.info("could not deregister %s instance %s, it expires within %gs: %s",
                        self.service, self.instance_id, self.ttl, exc)

    async def _store_poked(self) -> None:
        try:
            while self._poked:
                async with self._writing:
                    if self._poked and not await self._store_next_poked():
                        return
            self._poke_failing = False
        except Exception:  # noqa: BLE001 - a poke must never disturb the service; the heartbeat catches up
            if not self._poke_failing:
                logger.exception("reporting a state change of %s instance %s failed unexpectedly; the next "
                                 "heartbeat reports the current status", self.service, self.instance_id)
            self._poke_failing = True
            self._poked.clear()

    async def _store_next_poked(self) -> bool:
        """Store the oldest poked status (the caller holds `_writing`); an unreachable store drops the rest."""
        if await self._store_status(await self._resolve(self._poked.popleft()), announce=True):
            return True
        self._poked.clear()
        return False

    async def _store_status(self, status: Mapping[str, Any], *, announce: bool) -> bool:
        # What an instance reports (last errors included) may quote a connection string: it leaves scrubbed.
        instance = InstanceStatus(self.service, self.instance_id, scrub_tree(status), self._next_stamp(),
                                  self.started_unix_ms)
        try:
            # A store call never takes longer than the ttl: by then this heartbeat is worthless anyway.
            async with asyncio.timeout(self.ttl):
                await self._store.heartbeat(instance, self.ttl)
                if announce:
                    await self._store.publish_event(instance_status_event(instance))
        except (CoordinationUnavailable, TimeoutError) as exc:
            self._store_outage.failed(exc)
            return False
        self._store_outage.succeeded()
        return True

    def _next_stamp(self) -> int:
        self._last_stamp = max(int(self._clock() * 1000), self._last_stamp + 1)
        return self._last_stamp

    def _status_now(self) -> Mapping[str, Any] | None:
        """The status taken now, or None when only an asynchronous status function can compute it."""
        if inspect.iscoroutinefunction(self._status_fn):
            return None
        try:
            value = self._status_fn()
        except Exception as exc:  # noqa: BLE001 - reported like a failing heartbeat status
            return self._status_error(exc)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            return None
        return value

    async def _resolve(self, poked: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """A poked status checked, or (None) the status computed now."""
        try:
            value = self._status_fn() if poked is None else poked
            status = await value if inspect.isawaitable(value) else value
            to_json(f"status of {self.service} instance {self.instance_id}", status)
        except Exception as exc:  # noqa: BLE001 - a broken status must not stop the heartbeat
            return self._status_error(exc)
        if self._status_failing:
            logger.info("status of %s instance %s computes again", self.service, self.instance_id)
        self._status_failing = False
        return status

    def _status_error(self, exc: Exception) -> Mapping[str, Any]:
        if not self._status_failing:
            logger.error("status of %s instance %s could not be computed; reporting the error instead",
                         self.service, self.instance_id, exc_info=exc)
        self._status_failing = True
        return {"status_error": f"{type(exc).__name__}: {exc}"}
