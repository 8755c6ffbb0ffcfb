"""The live instances as their events and periodic registry reads report them, and the state changes they make."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from laredo_core.coordination.outage import OutageLog
from laredo_core.coordination.ports import InstanceStatus
from laredo_core.coordination.status_reports import instance_from_event
from laredo_core.runtime import run_together

from laredo_oam.application.reports import Reports
from laredo_oam.application.status_view import system_status_of
from laredo_oam.domain.catalog import Catalog
from laredo_oam.domain.watch import StatusSnapshot, WatchEvent, changes_between, snapshot_of
from laredo_oam.ports import CoordinationStore, CoordinationUnavailable

log = logging.getLogger(__name__)

InstanceKey = tuple[str, str]  # service, instance id
REMEMBERED_GONE = 1024  # stamps of vanished instances kept, so a late event cannot bring one back


class InstanceTracker:
    """Keeps a map of instance records current and hands the status changes it sees to `emit`.

    - Sources: `instance_status` events (each state change, at once) and a read of the registry every
      `refresh_interval` seconds (catches events lost while not subscribed, and notices vanished instances).
    - Order: a record replaces the one held only when its `heartbeat_unix_ms` is newer, whichever path
      brought it first, so an event overtaken by a registry read never moves a state backwards.
    - Seed: the first successful registry read sets the reference view and emits nothing; from then on every
      change of the map recomputes the view (system_status_of) and emits the differences.
    - Vanished: an instance missing from a read is gone (its ttl lapsed or it deregistered), except within
      `recovery_grace` seconds after the store was unreachable: instances re-register after an empty Redis
      restart, and an outage of the store is not an outage of the instances.
    - Outage: while the store is unreachable nothing changes and nothing is emitted (one warning, one info).
    """

    def __init__(self, store: CoordinationStore, catalog: Catalog, emit: Callable[[list[WatchEvent]], None], *,
                 refresh_interval: float = 1.0, recovery_grace: float = 15.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._catalog = catalog
        self._emit = emit
        self._refresh_interval = refresh_interval
        self._recovery_grace = recovery_grace
        self._clock = clock
        self.seeded = asyncio.Event()  # set after the first read attempt, successful or not
        self._instances: dict[InstanceKey, InstanceStatus] = {}
        self._gone: OrderedDict[InstanceKey, int] = OrderedDict()
        self._snapshot: StatusSnapshot | None = None
        self._keep_until = 0.0  # vanished instances are kept until then (grace after an outage)
        self._outage = OutageLog(log, "status watch")

    @property
    def store_down(self) -> bool:
        """The last read of the registry failed (the store is unreachable)."""
        return self._outage.down

    async def run(self) -> None:
        """Follow events and refresh until cancelled; never raises CoordinationUnavailable."""
        events = self._store.events()
        try:
            with contextlib.suppress(CoordinationUnavailable):  # the iteration joins once the store is back
                await events.join()
            await self.refresh()
            self.seeded.set()
            await run_together(self._follow_events(events), self._keep_refreshing())
        finally:
            self.seeded.set()
            await events.aclose()

    async def refresh(self) -> None:
        """Read the registry once and apply it (vanished instances included)."""
        try:
            listed = await self._store.instances()
        except CoordinationUnavailable as exc:
            if not self._outage.down:
                self._keep_until = float("inf")  # until it is back, and then for the grace
            self._outage.failed(exc)
            return
        now = self._clock()
        if self._outage.down:
            self._keep_until = now + self._recovery_grace
        self._outage.succeeded()
        changed = self._accept(listed)
        present = {(i.service, i.instance_id) for i in listed}
        if now >= self._keep_until:
            for key in [k for k in self._instances if k not in present]:
                self._forget(key)
                changed = True
        if changed or self._snapshot is None:
            self._recompute()

    def apply(self, instances: Iterable[InstanceStatus]) -> None:
        """Records from events: accepted when newer than what is held (only a registry read seeds the view)."""
        if self._accept(instances) and self._snapshot is not None:
            self._recompute()

    async def _follow_events(self, events: object) -> None:
        async for event in events:  # type: ignore[attr-defined]
            instance = instance_from_event(event)
            if instance is not None:
                self.apply((instance,))

    async def _keep_refreshing(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_interval)  # a watcher's clock, not a data path
            await self.refresh()

    def _accept(self, instances: Iterable[InstanceStatus]) -> bool:
        changed = False
        for instance in instances:
            key = (instance.service, instance.instance_id)
            held = self._instances.get(key)
            newest = held.heartbeat_unix_ms if held is not None else self._gone.get(key, 0)
            if instance.heartbeat_unix_ms <= newest:
                continue
            self._gone.pop(key, None)
            self._instances[key] = instance
            changed = True
        return changed

    def _forget(self, key: InstanceKey) -> None:
        self._gone[key] = self._instances.pop(key).heartbeat_unix_ms
        while len(self._gone) > REMEMBERED_GONE:
            self._gone.popitem(last=False)

    def _recompute(self) -> None:
        instances = tuple(sorted(self._instances.values(), key=lambda i: (i.service, i.instance_id)))
        snapshot = snapshot_of(system_status_of(Reports(instances), self._catalog))
        before, self._snapshot = self._snapshot, snapshot
        if before is None:
            return
        events = changes_between(before, snapshot, int(time.time() * 1000))
        if events:
            self._emit(events)
