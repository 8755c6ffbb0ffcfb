"""WatchStatus: state changes derived from the instances' reports, and row changes read from the change stream.

One shared watch per OAM process: it starts when the first watcher arrives (an InstanceTracker over the
coordination store, and the ChangeTail following the tables watchers want) and stops when the last one leaves.
Each watcher gets the events its filter admits through a bounded queue of `buffer_size` (256 by the
specification): when the client reads too slowly, the OLDEST queued events are dropped, so a slow reader still
ends up with the latest states; nothing upstream ever waits for a watcher. Drops are counted and logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence

from laredo_core.runtime import cancel, run_together
from laredo_kernel.changes import TableId

from laredo_oam.application.instance_tracker import InstanceTracker
from laredo_oam.domain.catalog import Catalog, PipelineKey, table_from_request
from laredo_oam.domain.errors import NotFound
from laredo_oam.domain.watch import ObservedChange, RowChanged, WatchEvent, WatchFilter
from laredo_oam.ports import ChangeTail, CoordinationStore, TailTopic

log = logging.getLogger(__name__)

WATCH_BUFFER = 256  # events queued per watcher (specification: WatchStatus backpressure)
SEED_WAIT = 5.0  # seconds a new watcher waits for the first read of the store before streaming anyway


class WatchEnded(Exception):
    """The shared watch stopped because of an unexpected error; the watcher's stream ends with it."""


class Watcher:
    """One WatchStatus stream: its filter and its bounded queue (drop-oldest). Iterate it for the events."""

    def __init__(self, watch_filter: WatchFilter, capacity: int) -> None:
        self.filter = watch_filter
        self.capacity = capacity
        self.dropped = 0
        self._queue: deque[WatchEvent] = deque()
        self._arrived = asyncio.Event()
        self._closed = False
        self._error: BaseException | None = None

    def offer(self, event: WatchEvent) -> None:
        """Queue an event without ever waiting; a full queue loses its oldest event."""
        if self._closed:
            return
        if len(self._queue) >= self.capacity:
            self._queue.popleft()
            self.dropped += 1
            if self.dropped == 1:
                log.warning("a WatchStatus client reads too slowly: its oldest events are dropped (buffer %d)",
                            self.capacity)
        self._queue.append(event)
        self._arrived.set()

    def close(self, error: BaseException | None = None) -> None:
        self._closed, self._error = True, error
        self._arrived.set()

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._queue:
            if self._closed:
                if self._error is not None:
                    raise WatchEnded(f"status watching stopped: {self._error}") from self._error
                raise StopAsyncIteration
            self._arrived.clear()
            await self._arrived.wait()
        return self._queue.popleft()


class StatusWatch:
    """The shared watch; `watch(filter)` is one watcher's lifetime. See the module docstring."""

    def __init__(self, store: CoordinationStore, catalog: Catalog, tail: ChangeTail | None = None, *,
                 buffer_size: int = WATCH_BUFFER, refresh_interval: float = 1.0, recovery_grace: float = 15.0,
                 seed_wait: float = SEED_WAIT) -> None:
        self._store = store
        self._catalog = catalog
        self._tail = tail
        self._buffer_size = buffer_size
        self._refresh_interval = refresh_interval
        self._recovery_grace = recovery_grace
        self._seed_wait = seed_wait
        self._watchers: set[Watcher] = set()
        self._task: asyncio.Task[None] | None = None
        self._tracker: InstanceTracker | None = None
        self._pipelines_of: dict[tuple[str, TableId], list[PipelineKey]] = {}
        for key in catalog.pipelines():
            self._pipelines_of.setdefault((key.source_id, key.table), []).append(key)

    @property
    def watchers(self) -> int:
        return len(self._watchers)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def store_reachable(self) -> bool | None:
        """Whether the watch's last read of the store succeeded; None while nobody watches."""
        return None if self._tracker is None else not self._tracker.store_down

    def filter_for(self, tables: Sequence[str], pipeline_ids: Sequence[str]) -> WatchFilter:
        """A request's filters, checked: InvalidRequest when malformed, NotFound when not configured."""
        wanted_tables = frozenset(table_from_request("", t) for t in tables)
        unknown = sorted(str(t) for t in wanted_tables if not self._catalog.tables_named(t))
        if unknown:
            known = ", ".join(sorted({str(t.table) for t in self._catalog.tables})) or "none"
            raise NotFound(f"cannot watch table(s) {', '.join(unknown)}: not configured; configured tables: {known}")
        keys = frozenset(PipelineKey.parse(p) for p in pipeline_ids)
        missing = sorted(k.pipeline_id for k in keys if k not in self._catalog.pipelines())
        if missing:
            raise NotFound(f"cannot watch pipeline(s) {', '.join(missing)}: they do not exist; configured "
                           f"pipelines: {self._catalog.pipeline_ids()}")
        return WatchFilter(wanted_tables, keys)

    @contextlib.asynccontextmanager
    async def watch(self, watch_filter: WatchFilter) -> AsyncIterator[Watcher]:
        """Register a watcher for the block's duration; the events start once the store was read once."""
        watcher = Watcher(watch_filter, self._buffer_size)
        self._watchers.add(watcher)
        tracker = self._start()
        self._follow_rows()
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._seed_wait):
                    await tracker.seeded.wait()
            yield watcher
        finally:
            self._watchers.discard(watcher)
            watcher.close()
            if watcher.dropped:
                log.info("WatchStatus client left; %d events were dropped for it", watcher.dropped)
            if self._watchers:
                self._follow_rows()
            else:
                await self._stop()

    async def aclose(self) -> None:
        """End every watcher's stream and stop watching (shutdown)."""
        for watcher in list(self._watchers):
            watcher.close()
        self._watchers.clear()
        await self._stop()

    def _start(self) -> InstanceTracker:
        if self.running and self._tracker is not None:
            return self._tracker
        self._tracker = tracker = InstanceTracker(self._store, self._catalog, self._deliver,
                                                  refresh_interval=self._refresh_interval,
                                                  recovery_grace=self._recovery_grace)
        self._task = asyncio.create_task(self._run(tracker), name="oam-status-watch")
        self._task.add_done_callback(self._ended)
        return tracker

    async def _stop(self) -> None:
        task, self._task, self._tracker = self._task, None, None
        if self._tail is not None:
            self._tail.follow(frozenset())
        await cancel([task])

    async def _run(self, tracker: InstanceTracker) -> None:
        await run_together(tracker.run(), *([self._tail_rows(self._tail)] if self._tail is not None else []))

    async def _tail_rows(self, tail: ChangeTail) -> None:
        try:
            await tail.run(self._on_changes)
        except Exception:  # noqa: BLE001 - row changes stop; state changes go on
            log.exception("reading row changes for WatchStatus failed; watchers get state changes only")

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        log.error("status watching stopped unexpectedly; ending every WatchStatus stream", exc_info=error)
        for watcher in list(self._watchers):
            watcher.close(error)
        if self._task is task:
            self._task = self._tracker = None

    def _deliver(self, events: Sequence[WatchEvent]) -> None:
        for watcher in list(self._watchers):
            for event in events:
                if watcher.filter.admits(event):
                    watcher.offer(event)

    def _on_changes(self, changes: Sequence[ObservedChange]) -> None:
        """One stream message's changes: a row_change per change per pipeline of its table."""
        if not self._watchers:
            return
        now = int(time.time() * 1000)
        for change in changes:
            for key in self._pipelines_of.get((change.source_id, change.table), ()):
                interested = [w for w in self._watchers if w.filter.admits_pipeline(key)]
                if not interested:
                    continue
                event = RowChanged(key, change.action, str(change.position), change.xid, now)
                for watcher in interested:
                    watcher.offer(event)

    def _follow_rows(self) -> None:
        """Follow what the watchers need: whole sources for an unfiltered watcher, else the admitted pipelines'
        tables."""
        if self._tail is None:
            return
        keys = self._catalog.pipelines()
        if any(w.filter.everything for w in self._watchers):
            self._tail.follow(frozenset(TailTopic(k.source_id) for k in keys))
        else:
            self._tail.follow(frozenset(TailTopic(k.source_id, k.table) for k in keys
                                        if any(w.filter.admits_pipeline(k) for w in self._watchers)))
