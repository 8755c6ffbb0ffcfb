"""Loops every instance runs against the CoordinationStore: its status heartbeat and, for ingest, a leader lease.

Only the port is used here (no Redis import), so services' application layers may use these helpers.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from laredo_core.coordination.outage import OutageLog
from laredo_core.coordination.ports import CoordinationStore, CoordinationUnavailable, InstanceStatus
from laredo_core.coordination.records import check_name, to_json

logger = logging.getLogger(__name__)

StatusFn = Callable[[], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]


class InstanceHeartbeat:
    """Stores this instance's status every `interval` seconds with a `ttl`, for as long as `run()` runs.

    `run()` is meant for the service's TaskGroup: it never raises except CancelledError, because coordination
    must never stop a service that moves data. An unreachable store logs one warning when the outage starts
    and one info line when it ends; a `status_fn` that fails or returns something not JSON-compatible logs
    once and is reported as `{"status_error": ...}`, so the instance stays visible; any other error of a
    heartbeat is logged once per run of failures.
    """

    def __init__(self, store: CoordinationStore, service: str, instance_id: str, status_fn: StatusFn,
                 interval: float = 5.0, ttl: float = 15.0) -> None:
        if not 0 < interval < ttl:
            raise ValueError(f"heartbeat interval ({interval}s) must be positive and below its ttl ({ttl}s), "
                             "or the instance would expire between heartbeats; use a ttl of about 3 intervals")
        self.service = check_name("service", service)
        self.instance_id = check_name("instance id", instance_id)
        self.interval = interval
        self.ttl = ttl
        self._store = store
        self._status_fn = status_fn
        self._store_outage = OutageLog(logger, f"heartbeat of {service} instance {instance_id}")
        self._status_failing = False
        self._beat_failing = False

    async def run(self) -> None:
        while True:
            try:
                await self.beat()
                self._beat_failing = False
            except Exception:  # noqa: BLE001 - logged; the next beat may succeed, data must keep flowing
                if not self._beat_failing:
                    logger.exception("heartbeat of %s instance %s failed unexpectedly; retrying every %gs",
                                     self.service, self.instance_id, self.interval)
                self._beat_failing = True
            await asyncio.sleep(self.interval)

    async def beat(self) -> bool:
        """Store the current status once; False if the store is unreachable."""
        instance = InstanceStatus(self.service, self.instance_id, await self._status())
        try:
            # A store call never takes longer than the ttl: by then this heartbeat is worthless anyway.
            async with asyncio.timeout(self.ttl):
                await self._store.heartbeat(instance, self.ttl)
        except (CoordinationUnavailable, TimeoutError) as exc:
            self._store_outage.failed(exc)
            return False
        self._store_outage.succeeded()
        return True

    async def deregister(self) -> None:
        """Remove this instance from the registry now (clean shutdown); an unreachable store is ignored,
        the entry then expires after its ttl."""
        try:
            await self._store.deregister(self.service, self.instance_id)
        except CoordinationUnavailable as exc:
            logger.info("could not deregister %s instance %s, it expires within %gs: %s",
                        self.service, self.instance_id, self.ttl, exc)

    async def _status(self) -> Mapping[str, Any]:
        try:
            value = self._status_fn()
            status = await value if inspect.isawaitable(value) else value
            to_json(f"status of {self.service} instance {self.instance_id}", status)
        except Exception as exc:  # noqa: BLE001 - a broken status must not stop the heartbeat
            if not self._status_failing:
                logger.exception("status of %s instance %s could not be computed; reporting the error instead",
                                 self.service, self.instance_id)
            self._status_failing = True
            return {"status_error": f"{type(exc).__name__}: {exc}"}
        if self._status_failing:
            logger.info("status of %s instance %s computes again", self.service, self.instance_id)
        self._status_failing = False
        return status


class LeaderLease:
    """Leadership of `name` for `holder`, renewed in the background every `renew_every` seconds.

    Use: `if await lease.acquire(stop): run the leader's work until lease.lost is set or stop is set`, then
    `await lease.release()`. Safety: the lease is taken as lost (`lost` set, `is_leader` False) as soon as a
    renewal is refused, and also when no renewal succeeded for `ttl - margin` seconds counted from the moment
    the last successful one was *sent* (so before Redis can let the lease lapse and a standby take it), even if
    the store stays unreachable. Two holders therefore never both believe they lead, as long as the leader
    stops acting when `lost` is set. After a loss, `acquire()` may be called again.
    """

    def __init__(self, store: CoordinationStore, name: str, holder: str, ttl: float = 10.0,
                 renew_every: float | None = None) -> None:
        renew_every = ttl / 3 if renew_every is None else renew_every
        if not 0 < renew_every <= ttl / 2:
            raise ValueError(f"lease {name!r}: renew_every ({renew_every}s) must be positive and at most half the "
                             f"ttl ({ttl}s), so one failed renewal does not lose the lease")
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.renew_every = renew_every
        # Room for the leader to stop before the lease can lapse in the store (and for clock-rate drift).
        self.margin = min(ttl / 5, 2.0)
        self.lost = asyncio.Event()
        self._store = store
        self._valid_until = 0.0  # event-loop time before which this holder surely still holds the lease
        self._renewal: asyncio.Task[None] | None = None
        self._outage = OutageLog(logger, f"lease {name!r} of {holder}")

    @property
    def is_leader(self) -> bool:
        return (self._renewal is not None and not self.lost.is_set()
                and asyncio.get_running_loop().time() < self._valid_until)

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this holder has the lease (True), or until `stop` is set (False)."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            sent_at = loop.time()
            try:
                acquired = await self._store.acquire_lease(self.name, self.holder, self.ttl)
                self._outage.succeeded()
            except CoordinationUnavailable as exc:
                self._outage.failed(exc)
                acquired = False
            if acquired:
                self._start_renewing(sent_at)
                logger.info("%s holds lease %r (ttl %gs)", self.holder, self.name, self.ttl)
                return True
            try:
                async with asyncio.timeout(self.renew_every):
                    await stop.wait()
            except TimeoutError:
                pass
        return False

    async def release(self) -> None:
        """Stop renewing and free the lease; if the store is unreachable the lease lapses after its ttl."""
        await self._stop_renewing()
        self._valid_until = 0.0
        try:
            await self._store.release_lease(self.name, self.holder)
        except CoordinationUnavailable as exc:
            logger.info("could not release lease %r, it lapses within %gs: %s", self.name, self.ttl, exc)

    def _start_renewing(self, sent_at: float) -> None:
        self._valid_until = sent_at + self.ttl - self.margin
        self.lost.clear()
        if self._renewal is None or self._renewal.done():
            self._renewal = asyncio.create_task(self._keep_renewing(), name=f"lease-renewal:{self.name}")

    async def _stop_renewing(self) -> None:
        task, self._renewal = self._renewal, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _keep_renewing(self) -> None:
        loop = asyncio.get_running_loop()
        next_renewal = loop.time() + self.renew_every
        try:
            while True:
                async with asyncio.timeout_at(self._valid_until):
                    await asyncio.sleep(max(0.0, next_renewal - loop.time()))
                    sent_at = loop.time()
                    try:
                        renewed = await self._store.renew_lease(self.name, self.holder, self.ttl)
                    except CoordinationUnavailable as exc:
                        self._outage.failed(exc)
                        next_renewal = loop.time() + min(self.renew_every, self.margin / 2)
                        continue
                self._outage.succeeded()
                if not renewed:
                    self._lose("the store says another holder has it or it lapsed")
                    return
                self._valid_until = sent_at + self.ttl - self.margin
                next_renewal = sent_at + self.renew_every
        except TimeoutError:
            self._lose(f"no renewal succeeded within {self.ttl - self.margin:g}s")
        except Exception:  # noqa: BLE001 - unsure whether we still hold it, so we do not
            logger.exception("renewing lease %r failed unexpectedly", self.name)
            self._lose("its renewal failed unexpectedly")
        finally:
            if not self.lost.is_set() and self._renewal is asyncio.current_task() and not _cancelling():
                self._lose("its renewal loop stopped unexpectedly")

    def _lose(self, why: str) -> None:
        self._valid_until = 0.0
        self.lost.set()
        logger.warning("%s lost lease %r (%s); it must stop acting as leader now", self.holder, self.name, why)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
