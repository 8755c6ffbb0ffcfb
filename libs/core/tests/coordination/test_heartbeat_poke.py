"""InstanceHeartbeat.poke(): immediate, ordered, coalesced, never blocking; the instance_status event form."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from laredo_kernel.changes import ColumnInfo
from laredo_core.coordination.heartbeat import InstanceHeartbeat
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import Event, InstanceStatus
from laredo_core.coordination.status_reports import (
    INSTANCE_STATUS,
    column_report,
    instance_from_event,
    instance_status_event,
)
from laredo_core.coordination.subscriptions import EventSubscription
from laredo_testing.eventually import eventually

HEARTBEAT_LOGGER = "laredo_core.coordination.heartbeat"


class Phase:
    def __init__(self) -> None:
        self.value = "starting"

    def __call__(self) -> Mapping[str, Any]:
        return {"phase": self.value}


@pytest.fixture
async def running() -> AsyncIterator[tuple[InMemoryCoordinationStore, Phase, InstanceHeartbeat, EventSubscription]]:
    store = InMemoryCoordinationStore()
    phase = Phase()
    heartbeat = InstanceHeartbeat(store, "ingest", "i1", phase, interval=30.0, ttl=90.0)
    events = store.events()
    await events.join()
    task = asyncio.create_task(heartbeat.run())
    try:
        first = await _next_status(events)  # the first heartbeat is announced too
        assert first.status == {"phase": "starting"} and await _listed(store)
        yield store, phase, heartbeat, events
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await events.aclose()


async def _listed(store: InMemoryCoordinationStore) -> bool:
    return bool(await store.instances())


async def _next_status(events: EventSubscription) -> InstanceStatus:
    event = await asyncio.wait_for(anext(events), 5)
    instance = instance_from_event(event)
    assert instance is not None, event
    return instance


async def test_every_poked_transition_is_stored_and_announced_in_order(running) -> None:
    store, phase, heartbeat, events = running
    for value in ("baseline", "streaming", "paused", "streaming"):
        phase.value = value
        heartbeat.poke()  # no await: the data path goes on at once
    seen = [await _next_status(events) for _ in range(4)]
    assert [i.status["phase"] for i in seen] == ["baseline", "streaming", "paused", "streaming"]
    assert [(i.service, i.instance_id) for i in seen] == [("ingest", "i1")] * 4
    stamps = [i.heartbeat_unix_ms for i in seen]
    assert stamps == sorted(set(stamps)), "stamps increase strictly"
    [stored] = await store.instances()
    assert stored.status == {"phase": "streaming"} and stored.heartbeat_unix_ms == stamps[-1]


async def test_identical_consecutive_pokes_are_coalesced(running) -> None:
    _, phase, heartbeat, events = running
    phase.value = "baseline"
    heartbeat.poke()
    heartbeat.poke()
    phase.value = "streaming"
    heartbeat.poke()
    assert [(await _next_status(events)).status["phase"] for _ in range(2)] == ["baseline", "streaming"]
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(events), 0.3)


async def test_a_periodic_beat_stores_waiting_pokes_first(running) -> None:
    store, phase, heartbeat, events = running
    store.delay = 0.05  # the store is slow: pokes wait
    for value in ("baseline", "streaming"):
        phase.value = value
        heartbeat.poke()
    phase.value = "paused"
    assert await heartbeat.beat()
    store.delay = 0
    [stored] = await store.instances()
    assert stored.status == {"phase": "paused"}, "the store never ends with an older status"
    assert [(await _next_status(events)).status["phase"] for _ in range(2)] == ["baseline", "streaming"]


async def test_poke_with_the_store_down_only_logs_and_the_next_beat_catches_up(
        running, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=HEARTBEAT_LOGGER)
    store, phase, heartbeat, _ = running
    store.unavailable = True
    for value in ("baseline", "streaming", "paused"):
        phase.value = value
        heartbeat.poke()
    await eventually(lambda: any("unavailable" in r.getMessage() for r in caplog.records), what="the outage log")
    store.unavailable = False
    assert await heartbeat.beat()
    [stored] = await store.instances()
    assert stored.status == {"phase": "paused"}
    warnings = [r for r in caplog.records if r.name == HEARTBEAT_LOGGER and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


async def test_the_first_beat_after_an_outage_is_announced() -> None:
    store = InMemoryCoordinationStore()
    phase = Phase()
    calls = []
    heartbeat = InstanceHeartbeat(store, "ingest", "i1", lambda: calls.append(1) or phase(), interval=0.05, ttl=1.0)
    events = store.events()
    await events.join()
    task = asyncio.create_task(heartbeat.run())
    try:
        assert (await _next_status(events)).status == {"phase": "starting"}
        store.unavailable = True
        during = len(calls)
        await eventually(lambda: len(calls) >= during + 2, what="beats during the outage")
        phase.value = "streaming"
        store.unavailable = False
        store.clear()  # an empty restart
        during_outage, events = events, store.events()
        await events.join()  # no await before it yields: the next beat cannot slip in between
        await during_outage.aclose()
        back = await _next_status(events)
        assert back.status == {"phase": "streaming"} and await _listed(store)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await events.aclose()


async def test_pokes_before_the_heartbeat_runs_are_stored_by_its_first_beat() -> None:
    store = InMemoryCoordinationStore()
    events = store.events()
    await events.join()
    phase = Phase()
    heartbeat = InstanceHeartbeat(store, "ingest", "i1", phase, interval=30.0, ttl=90.0)
    for value in ("baseline", "streaming"):
        phase.value = value
        heartbeat.poke()
    await asyncio.sleep(0)
    assert await store.instances() == [], "nothing is written before run()"
    task = asyncio.create_task(heartbeat.run())
    try:
        seen = [(await _next_status(events)).status["phase"] for _ in range(3)]
        assert seen == ["baseline", "streaming", "streaming"]  # the pokes in order, then the first beat
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await events.aclose()


async def test_an_asynchronous_status_is_computed_when_stored(running) -> None:
    store, _, _, events = running

    async def status() -> Mapping[str, Any]:
        return {"ready": True}

    heartbeat = InstanceHeartbeat(store, "fanout", "f1", status, interval=30.0, ttl=90.0)
    task = asyncio.create_task(heartbeat.run())
    try:
        assert (await _next_status(events)).service == "fanout"  # its first heartbeat
        heartbeat.poke()
        instance = await _next_status(events)
        assert (instance.service, instance.status) == ("fanout", {"ready": True})
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_deregistering_drops_waiting_pokes(running) -> None:
    store, phase, heartbeat, _ = running
    store.delay = 0.05
    phase.value = "stopped"
    heartbeat.poke()
    store.delay = 0
    await heartbeat.deregister()
    await asyncio.sleep(0.1)  # room for a write that must not happen
    assert await store.instances() == []


async def test_stamps_increase_strictly_even_within_one_millisecond() -> None:
    store = InMemoryCoordinationStore()
    heartbeat = InstanceHeartbeat(store, "ingest", "i1", lambda: {}, interval=1.0, ttl=3.0, clock=lambda: 1000.0)
    stamps = []
    for _ in range(3):
        assert await heartbeat.beat()
        stamps.append((await store.instances())[0].heartbeat_unix_ms)
    assert stamps == [1_000_000, 1_000_001, 1_000_002]


async def test_every_record_carries_when_the_instance_started() -> None:
    store, now = InMemoryCoordinationStore(), [1000.0]
    heartbeat = InstanceHeartbeat(store, "ingest", "i1", lambda: {}, interval=1.0, ttl=3.0, clock=lambda: now[0])
    events = store.events()
    await events.join()
    try:
        now[0] = 1060.0
        assert await heartbeat.beat(announce=True)
        [stored] = await store.instances()
        assert (stored.started_unix_ms, stored.heartbeat_unix_ms) == (1_000_000, 1_060_000)
        assert (await _next_status(events)).started_unix_ms == 1_000_000
    finally:
        await events.aclose()


def test_instance_status_events_round_trip_and_reject_other_payloads() -> None:
    instance = InstanceStatus("fanout", "f1", {"ready": True, "tables": {}}, 1_700_000_000_123, 1_700_000_000_000)
    event = instance_status_event(instance)
    assert event.kind == INSTANCE_STATUS
    assert instance_from_event(event) == instance
    assert instance_from_event(Event("pipeline_state", dict(event.payload))) is None
    for broken in ({}, {**event.payload, "status": "x"}, {**event.payload, "instance_id": ""},
                   {**event.payload, "heartbeat_unix_ms": "1"}):
        assert instance_from_event(Event(INSTANCE_STATUS, broken)) is None, broken


def test_column_report_is_what_oam_reads() -> None:
    columns = (ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
               ColumnInfo("name", 25, "text"))
    assert column_report(columns) == [
        {"ordinal_position": 1, "name": "id", "type": "int8", "type_oid": 20, "not_null": True,
         "primary_key_ordinal": 1},
        {"ordinal_position": 2, "name": "name", "type": "text", "type_oid": 25, "not_null": False,
         "primary_key_ordinal": 0},
    ]
