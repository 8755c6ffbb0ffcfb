"""StatusWatch over the in-memory store and change tail: transitions in order, filters, row changes, outages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from laredo_kernel.changes import Action, TableId
from laredo_core.coordination.heartbeat import InstanceHeartbeat
from laredo_core.coordination.ports import InstanceStatus
from laredo_kernel.position import Position
from laredo_testing.eventually import eventually

from laredo_oam.adapters.memory import InMemoryCoordinationStore, ManualClock, MemoryChangeTail
from laredo_oam.application.instance_tracker import InstanceTracker
from laredo_oam.application.status_watch import StatusWatch, Watcher
from laredo_oam.domain.catalog import Catalog, ConfiguredSource, ConfiguredTable, ConfiguredTarget, PipelineKey
from laredo_oam.domain.errors import InvalidRequest, NotFound
from laredo_oam.domain.states import PipelineState as P
from laredo_oam.domain.states import ServiceState as S
from laredo_oam.domain.watch import (
    ObservedChange,
    PipelineStateChanged,
    RowChanged,
    ServiceStateChanged,
    SourceLink,
    SourceStateChanged,
    WatchEvent,
    WatchFilter,
)
from laredo_oam.ports import TailTopic

USERS_T, ORDERS_T = TableId("public", "users"), TableId("public", "orders")
USERS = PipelineKey("pg", USERS_T, "replication-fanout")
USERS_Q = PipelineKey("pg", USERS_T, "indexed-memory")
ORDERS = PipelineKey("pg", ORDERS_T, "replication-fanout")
CATALOG = Catalog((ConfiguredSource("pg"),), (
    ConfiguredTable("pg", USERS_T, (ConfiguredTarget("replication-fanout"), ConfiguredTarget("indexed-memory"))),
    ConfiguredTable("pg", ORDERS_T, (ConfiguredTarget("replication-fanout"),)),
))


class Reported:
    """A status an instance reports; change it and poke the heartbeat, as the services do."""

    def __init__(self, **status: Any) -> None:
        self.status: dict[str, Any] = dict(status)

    def __call__(self) -> Mapping[str, Any]:
        return dict(self.status)


class Instances:
    """Fake ingest / fan-out / query instances heartbeating (slowly) into the store and poking on changes."""

    def __init__(self, store: InMemoryCoordinationStore) -> None:
        self.store = store
        self.beats: dict[str, InstanceHeartbeat] = {}
        self.tasks: list[asyncio.Task[None]] = []

    def start(self, service: str, instance_id: str, reported: Reported) -> InstanceHeartbeat:
        heartbeat = InstanceHeartbeat(self.store, service, instance_id, reported, interval=30.0, ttl=90.0)
        self.beats[instance_id] = heartbeat
        self.tasks.append(asyncio.create_task(heartbeat.run()))
        return heartbeat


@pytest.fixture
async def instances() -> AsyncIterator[Instances]:
    fakes = Instances(InMemoryCoordinationStore(block=0.05))
    yield fakes
    for task in fakes.tasks:
        task.cancel()
    await asyncio.gather(*fakes.tasks, return_exceptions=True)


def table(complete: bool) -> dict[str, Any]:
    return {"baseline_complete": complete, "rows": 3 if complete else 0}


async def collect(watcher: Watcher, until: Callable[[list[WatchEvent]], bool], seen: list[WatchEvent]) -> None:
    async for event in watcher:
        seen.append(event)
        if until(seen):
            return


async def events_until(watcher: Watcher, until: Callable[[list[WatchEvent]], bool],
                       timeout: float = 5.0) -> list[WatchEvent]:
    seen: list[WatchEvent] = []
    try:
        await asyncio.wait_for(collect(watcher, until, seen), timeout)
    except TimeoutError:
        raise AssertionError(f"the expected events did not arrive within {timeout}s; got {seen}") from None
    return seen


def pipeline_moves(events: list[WatchEvent], key: PipelineKey) -> list[tuple[P, P]]:
    return [(e.old, e.new) for e in events if isinstance(e, PipelineStateChanged) and e.key == key]


def service_moves(events: list[WatchEvent]) -> list[tuple[S, S]]:
    return [(e.old, e.new) for e in events if isinstance(e, ServiceStateChanged)]


async def test_a_short_baseline_shows_every_transition_in_order(instances: Instances) -> None:
    # Refreshes every 30 s: only the instances' pokes can deliver these transitions.
    watch = StatusWatch(instances.store, CATALOG, refresh_interval=30.0)
    fanout = Reported(ready=False, tables={"public.users": table(False), "public.orders": table(False)})
    query = Reported(ready=False, tables={"public.users": table(False)})
    ingest = Reported(source="pg", phase="starting", leader=True, baseline_complete=False)
    async with watch.watch(WatchFilter()) as watcher:
        fanout_beat = instances.start("fanout", "f1", fanout)
        query_beat = instances.start("query", "q1", query)
        await eventually(lambda: _count(instances.store, 2), what="fan-out and query registered")
        ingest_beat = instances.start("ingest", "i1", ingest)
        await eventually(lambda: _count(instances.store, 3), what="ingest registered")
        for phase, complete in (("baseline", False), ("streaming", True)):  # a baseline of a few milliseconds
            ingest.status.update(phase=phase, baseline_complete=complete)
            ingest_beat.poke()
        fanout.status.update(ready=True, tables={"public.users": table(True), "public.orders": table(True)})
        fanout_beat.poke()
        query.status.update(ready=True, tables={"public.users": table(True)})
        query_beat.poke()
        seen = await events_until(watcher, lambda seen: (S.BASELINING, S.STREAMING) in service_moves(seen))
    for key in (USERS, USERS_Q, ORDERS):
        assert pipeline_moves(seen, key) == [(P.STOPPED, P.INITIALIZING), (P.INITIALIZING, P.BASELINING),
                                             (P.BASELINING, P.STREAMING)], key
    assert service_moves(seen) == [(S.STARTING, S.BASELINING), (S.BASELINING, S.STREAMING)]
    [connected] = [e for e in seen if isinstance(e, SourceStateChanged)]
    assert connected.link is SourceLink.CONNECTED and "i1 reads source pg (baseline)" in connected.message
    assert seen.index(connected) < seen.index(next(e for e in seen if isinstance(e, PipelineStateChanged)
                                                   and e.new is P.BASELINING))


async def _count(store: InMemoryCoordinationStore, n: int) -> bool:
    return len(await store.instances()) == n


async def test_watchers_get_only_what_their_filters_admit(instances: Instances) -> None:
    tail = MemoryChangeTail()
    watch = StatusWatch(instances.store, CATALOG, tail, refresh_interval=30.0)
    fanout = Reported(tables={"public.users": table(False), "public.orders": table(False)})
    instances.start("ingest", "i1", Reported(source="pg", phase="streaming", baseline_complete=True))
    fanout_beat = instances.start("fanout", "f1", fanout)
    instances.start("query", "q1", Reported(tables={"public.users": table(True)}))
    await eventually(lambda: _count(instances.store, 3), what="instances registered")
    by_table = WatchFilter(tables=frozenset({USERS_T}))
    by_pipeline = WatchFilter(pipelines=frozenset({ORDERS}))
    async with watch.watch(by_table) as users_watcher, watch.watch(by_pipeline) as orders_watcher:
        assert tail.followed == {TailTopic("pg", USERS_T), TailTopic("pg", ORDERS_T)}
        await eventually(lambda: tail.running, what="the change tail running")
        fanout.status["tables"] = {"public.users": table(True), "public.orders": table(True)}
        fanout_beat.poke()
        for change_table, xid in ((ORDERS_T, 11), (USERS_T, 12)):
            assert tail.publish([ObservedChange("pg", change_table, Action.UPDATE, Position(0x16B3748, 0), xid)])
        users = await events_until(users_watcher, lambda seen: sum(isinstance(e, RowChanged) for e in seen) == 2
                                   and bool(service_moves(seen)))
        orders = await events_until(orders_watcher, lambda seen: any(isinstance(e, RowChanged) for e in seen)
                                    and bool(service_moves(seen)))
    assert pipeline_moves(users, USERS) == [(P.BASELINING, P.STREAMING)]
    assert not pipeline_moves(users, ORDERS) and not pipeline_moves(orders, USERS)
    assert pipeline_moves(orders, ORDERS) == [(P.BASELINING, P.STREAMING)]
    rows = [(e.key, e.action, e.position, e.xid) for e in users if isinstance(e, RowChanged)]
    assert rows == [(USERS, Action.UPDATE, "0/016B3748:0", 12), (USERS_Q, Action.UPDATE, "0/016B3748:0", 12)]
    assert [(e.key, e.xid) for e in orders if isinstance(e, RowChanged)] == [(ORDERS, 11)]
    # Service events pass every filter.
    assert service_moves(users) == service_moves(orders) == [(S.BASELINING, S.STREAMING)]


async def test_the_watch_runs_only_while_watched_and_follows_what_watchers_need(instances: Instances) -> None:
    tail = MemoryChangeTail()
    watch = StatusWatch(instances.store, CATALOG, tail, refresh_interval=30.0)
    assert not watch.running and not tail.running
    async with watch.watch(WatchFilter(pipelines=frozenset({USERS_Q}))):
        assert tail.followed == {TailTopic("pg", USERS_T)}
        async with watch.watch(WatchFilter()):
            assert tail.followed == {TailTopic("pg")}  # a whole source for an unfiltered watcher
        assert tail.followed == {TailTopic("pg", USERS_T)}
        await eventually(lambda: tail.running, what="the tail running")
        assert watch.running and watch.watchers == 1
    assert not watch.running and not tail.running and tail.followed == frozenset()
    async with watch.watch(WatchFilter()):
        await eventually(lambda: tail.running, what="the tail running again")
    assert tail.runs == 2


def test_filters_are_checked_against_the_catalog() -> None:
    watch = StatusWatch(InMemoryCoordinationStore(), CATALOG)
    assert watch.filter_for(["users", "public.orders"], [USERS_Q.pipeline_id]) == WatchFilter(
        frozenset({USERS_T, ORDERS_T}), frozenset({USERS_Q}))
    with pytest.raises(NotFound, match="public.nope"):
        watch.filter_for(["public.nope"], [])
    with pytest.raises(NotFound, match="pg:public.users:nope"):
        watch.filter_for([], ["pg:public.users:nope"])
    with pytest.raises(InvalidRequest, match="malformed"):
        watch.filter_for([], ["users"])


async def test_a_slow_watcher_loses_its_oldest_events() -> None:
    watcher = Watcher(WatchFilter(), capacity=3)
    for xid in range(5):
        watcher.offer(RowChanged(USERS, Action.INSERT, f"0/1:{xid}", xid))
    watcher.close()
    assert watcher.dropped == 2
    assert [e.xid async for e in watcher] == [2, 3, 4]  # type: ignore[union-attr]


# InstanceTracker: vanished instances and store outages, with manual clocks and explicit refreshes

class Tracked:
    def __init__(self) -> None:
        self.store_clock, self.clock = ManualClock(), ManualClock()
        self.store = InMemoryCoordinationStore(clock=self.store_clock)
        self.events: list[WatchEvent] = []
        self.tracker = InstanceTracker(self.store, CATALOG, self.events.extend, recovery_grace=15.0,
                                       clock=self.clock)

    async def beat(self, service: str, instance_id: str, status: Mapping[str, Any], ttl: float = 10.0) -> None:
        stamp = int(self.store_clock.now * 1000)
        await self.store.heartbeat(InstanceStatus(service, instance_id, status, stamp), ttl)


INGEST = {"source": "pg", "phase": "streaming", "baseline_complete": True}
FANOUT = {"tables": {"public.users": table(True), "public.orders": table(True)}}
QUERY = {"tables": {"public.users": table(True)}}


async def test_an_instance_whose_ttl_lapsed_is_gone() -> None:
    t = Tracked()
    await t.beat("ingest", "i1", INGEST)
    await t.beat("fanout", "f1", FANOUT, ttl=100.0)
    await t.tracker.refresh()
    assert t.events == []  # the first read is the reference
    t.store_clock.advance(11)  # the ingest instance stopped heartbeating
    await t.tracker.refresh()
    disconnected = [e for e in t.events if isinstance(e, SourceStateChanged)]
    assert [(e.source_id, e.link) for e in disconnected] == [("pg", SourceLink.DISCONNECTED)]
    assert "no ingest instance reports source pg" in disconnected[0].message
    assert pipeline_moves(t.events, USERS) == [(P.STREAMING, P.STOPPED)]


async def test_a_store_outage_emits_nothing_and_instances_get_a_grace_to_come_back() -> None:
    t = Tracked()
    await t.beat("ingest", "i1", INGEST)
    await t.beat("fanout", "f1", FANOUT)
    await t.tracker.refresh()
    t.store.unavailable = True
    for _ in range(3):
        t.store_clock.advance(5)
        t.clock.advance(5)
        await t.tracker.refresh()
    t.store.unavailable = False
    t.store.clear()  # Redis restarted empty: nobody is listed until the instances heartbeat again
    await t.tracker.refresh()
    assert t.events == [], "an outage of the store is not an outage of the instances"
    await t.beat("ingest", "i1", INGEST)  # it re-registers within the grace
    t.clock.advance(10)
    await t.tracker.refresh()
    assert t.events == []
    t.clock.advance(6)  # the grace is over; the fan-out instance never came back
    await t.tracker.refresh()
    assert pipeline_moves(t.events, USERS) == [(P.STREAMING, P.INITIALIZING)]
    assert not [e for e in t.events if isinstance(e, SourceStateChanged)]


async def test_records_apply_only_when_newer_whichever_path_brings_them() -> None:
    t = Tracked()
    await t.beat("ingest", "i1", {**INGEST, "phase": "baseline"})
    await t.beat("fanout", "f1", FANOUT)
    await t.beat("query", "q1", QUERY)
    await t.tracker.refresh()
    newer = InstanceStatus("ingest", "i1", INGEST, int(t.store_clock.now * 1000) + 5)
    t.tracker.apply([newer])  # an event arrives before the registry has it
    assert service_moves(t.events) == [(S.BASELINING, S.STREAMING)]
    await t.tracker.refresh()  # the registry still holds the older record: ignored
    t.tracker.apply([InstanceStatus("ingest", "i1", {**INGEST, "phase": "baseline"}, newer.heartbeat_unix_ms - 1)])
    assert service_moves(t.events) == [(S.BASELINING, S.STREAMING)]
