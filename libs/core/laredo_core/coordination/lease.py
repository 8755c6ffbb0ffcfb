"""Leadership of a named lease through the CoordinationStore, renewed in the background (one ingest per source)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from laredo_core.coordination.outage import OutageLog
from laredo_core.coordination.ports import CoordinationStore, CoordinationUnavailable
from laredo_core.runtime import cancel

logger = logging.getLogger(__name__)


class LeaderLease:
    """Leadership of `name` for `holder`, renewed in the background every `renew_every` seconds.

    Use: `if await lease.acquire(stop): run the leader's work until lease.lost is set or stop is set`, then
    `await lease.release()`. Safety: the lease is taken as lost (`lost` set, `is_leader` False) as soon as a
    renewal is refused, and also when no renewal succeeded for `ttl - margin` seconds counted from the moment
    the last successful one was *sent* (so before Redis can let the lease lapse and a standby take it), even if
    the store stays unreachable. Two holders therefore never both believe they lead, as long as the leader
    stops acting when `lost` is set. After a loss, `acquire()` may be called again.

    `hold_through_outage=True` is for leaders whose work is fenced elsewhere (ingest with a permanent
    replication slot: PostgreSQL lets one walsender use a slot at a time, so a second leader cannot read it).
    Such a leader keeps leading while the store is unreachable, instead of stopping the data flow; once the
    store answers again it renews, or re-takes a lease that vanished (a store restarted empty), and steps down
    only when another holder has taken it meanwhile.
    """

    def __init__(self, store: CoordinationStore, name: str, holder: str, ttl: float = 10.0,
                 renew_every: float | None = None, *, hold_through_outage: bool = False) -> None:
        renew_every = ttl / 3 if renew_every is None else renew_every
        if not 0 < renew_every <= ttl / 2:
            raise ValueError(f"lease {name!r}: renew_every ({renew_every}s) must be positive and at most half the "
                             f"ttl ({ttl}s), so one failed renewal does not lose the lease")
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.renew_every = renew_every
        self.hold_through_outage = hold_through_outage
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
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.renew_every):
                    await stop.wait()
        return False

    async def release(self) -> None:
        """Stop renewing and free the lease; if the store is unreachable the lease lapses after its ttl."""
        task, self._renewal = self._renewal, None
        await cancel([task])
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

    async def _keep_renewing(self) -> None:
        loop = asyncio.get_running_loop()
        next_renewal = loop.time() + self.renew_every
        try:
            while True:
                async with asyncio.timeout_at(self._valid_until):
                    await asyncio.sleep(max(0.0, next_renewal - loop.time()))
                    sent_at = loop.time()
                    try:
                        renewed = await self._renew_once()
                        if not renewed and self._outage.down and self.hold_through_outage:
                            # The store is back but forgot the lease (restarted empty): take it again if free.
                            renewed = await self._store.acquire_lease(self.name, self.holder, self.ttl)
                    except CoordinationUnavailable as exc:
                        self._outage.failed(exc)
                        if self.hold_through_outage:  # fenced elsewhere: keep leading until the store is back
                            self._valid_until = loop.time() + self.ttl
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

    async def _renew_once(self) -> bool:
        if not self.hold_through_outage:
            return await self._store.renew_lease(self.name, self.holder, self.ttl)
        try:  # a store that hangs instead of refusing counts as unreachable too
            async with asyncio.timeout(self.renew_every):
                return await self._store.renew_lease(self.name, self.holder, self.ttl)
        except TimeoutError as exc:
            raise CoordinationUnavailable(f"renewing lease {self.name!r} took over {self.renew_every:g}s") from exc

    def _lose(self, why: str) -> None:
        self._valid_until = 0.0
        self.lost.set()
        logger.warning("%s lost lease %r (%s); it must stop acting as leader now", self.holder, self.name, why)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
