"""Heartbeat and leader-lease loops, instance ids and the fake's faults, on the in-memory store."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any

import pytest

from laredo_core.coordination.heartbeat import InstanceHeartbeat, LeaderLease
from laredo_core.coordination.ids import default_instance_id
from laredo_core.coordination.memory import InMemoryCoordinationStore, ManualClock
from laredo_core.coordination.ports import CommandKind, CoordinationUnavailable, Event, InstanceStatus
from laredo_core.redaction import redact_url
from laredo_testing.eventually import eventually

HEARTBEAT_LOGGER = "laredo_core.coordination.heartbeat"


class CountingStatus:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Mapping[str, Any]:
        self.calls += 1
        return {"state": "STREAMING", "beat": self.calls}


async def listed(store: InMemoryCoordinationStore, instance_id: str) -> bool:
    return any(i.instance_id == instance_id for i in await store.instances())


# InstanceHeartbeat

async def test_heartbeat_survives_an_outage_and_logs_it_once_each_way(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=HEARTBEAT_LOGGER)
    store = InMemoryCoordinationStore()
    status = CountingStatus()
    heartbeat = InstanceHeartbeat(store, "fanout", "f1", status, interval=0.02, ttl=5.0)
    task = asyncio.create_task(heartbeat.run())
    try:
        await eventually(lambda: listed(store, "f1"), what="the first heartbeat")
        store.unavailable = True
        during = status.calls
        await eventually(lambda: status.calls >= during + 5, what="five heartbeats during the outage")
        assert not task.done()
        store.unavailable = False
        store.clear()  # came back empty
        await eventually(lambda: listed(store, "f1"), what="the heartbeat to resume")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    messages = [r.getMessage() for r in caplog.records if r.name == HEARTBEAT_LOGGER]
    assert len([m for m in messages if "unavailable" in m]) == 1, messages
    assert len([m for m in messages if "reachable again" in m]) == 1, messages


async def test_a_failing_status_is_reported_instead_of_stopping_the_heartbeat(
        caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryCoordinationStore()

    def broken() -> Mapping[str, Any]:
        raise KeyError("positions")

    heartbeat = InstanceHeartbeat(store, "query", "q1", broken, interval=1.0, ttl=3.0)
    assert await heartbeat.beat()
    assert await heartbeat.beat()
    [instance] = await store.instances("query")
    assert instance.status == {"status_error": "KeyError: 'positions'"}
    assert len([r for r in caplog.records if r.name == HEARTBEAT_LOGGER and r.levelno == logging.ERROR]) == 1


async def test_an_async_status_function_and_deregistration() -> None:
    store = InMemoryCoordinationStore()

    async def status() -> Mapping[str, Any]:
        return {"lag_bytes": 0}

    heartbeat = InstanceHeartbeat(store, "ingest", "i1", status, interval=1.0, ttl=3.0)
    assert await heartbeat.beat()
    assert [i.status for i in await store.instances("ingest")] == [{"lag_bytes": 0}]
    await heartbeat.deregister()
    assert await store.instances() == []
    store.unavailable = True
    assert not await heartbeat.beat()
    await heartbeat.deregister()  # unreachable: logged, not raised


async def test_a_status_that_is_not_json_is_reported_as_an_error() -> None:
    store = InMemoryCoordinationStore()
    heartbeat = InstanceHeartbeat(store, "query", "q1", lambda: {"since": object()}, interval=1.0, ttl=3.0)
    assert await heartbeat.beat()
    [instance] = await store.instances("query")
    assert "not JSON-compatible" in instance.status["status_error"]


async def test_the_heartbeat_loop_outlives_unexpected_errors(caplog: pytest.LogCaptureFixture) -> None:
    class FlakyStore(InMemoryCoordinationStore):
        failures = 3

        async def heartbeat(self, instance: InstanceStatus, ttl: float) -> None:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("unexpected reply")
            await super().heartbeat(instance, ttl)

    store = FlakyStore()
    task = asyncio.create_task(InstanceHeartbeat(store, "fanout", "f1", dict, interval=0.02, ttl=1.0).run())
    try:
        await eventually(lambda: listed(store, "f1"), what="a heartbeat after three unexpected failures")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len([r for r in caplog.records if r.name == HEARTBEAT_LOGGER and r.levelno == logging.ERROR]) == 1


def test_a_heartbeat_interval_must_be_below_its_ttl() -> None:
    with pytest.raises(ValueError, match="interval"):
        InstanceHeartbeat(InMemoryCoordinationStore(), "ingest", "i1", dict, interval=5.0, ttl=5.0)


# LeaderLease

async def test_a_standby_becomes_leader_when_the_leader_releases() -> None:
    store = InMemoryCoordinationStore()
    stop = asyncio.Event()
    leader = LeaderLease(store, "ingest:src1", "a", ttl=5.0, renew_every=0.1)
    standby = LeaderLease(store, "ingest:src1", "b", ttl=5.0, renew_every=0.1)
    assert await leader.acquire(stop) and leader.is_leader
    waiting = asyncio.create_task(standby.acquire(stop))
    await eventually(lambda: leader.is_leader and not waiting.done(), what="b to wait while a leads")
    await leader.release()
    assert await asyncio.wait_for(waiting, 5)
    assert standby.is_leader and not leader.is_leader and not leader.lost.is_set()
    assert await store.lease_holder("ingest:src1") == "b"
    await standby.release()


async def test_a_leader_that_cannot_renew_gives_up_before_its_lease_lapses() -> None:
    store = InMemoryCoordinationStore()
    lease = LeaderLease(store, "ingest:src1", "a", ttl=1.0, renew_every=0.1)
    assert await lease.acquire(asyncio.Event())
    loop = asyncio.get_running_loop()
    store.unavailable = True
    cut_at = loop.time()
    await eventually(lease.lost.is_set, timeout=3, what="the lease to count as lost")
    assert loop.time() - cut_at < lease.ttl, "lost must be set before the store could let the lease lapse"
    assert not lease.is_leader
    store.unavailable = False
    assert await lease.acquire(asyncio.Event()), "a lost lease can be acquired again"
    assert not lease.lost.is_set()
    await lease.release()


async def test_a_refused_renewal_loses_the_lease_at_once() -> None:
    clock = ManualClock()
    store = InMemoryCoordinationStore(clock=clock)
    lease = LeaderLease(store, "ingest:src1", "a", ttl=10.0, renew_every=0.05)
    assert await lease.acquire(asyncio.Event())
    clock.advance(11)  # the store let it lapse (e.g. a long pause of this process)
    assert await store.acquire_lease("ingest:src1", "b", ttl=10.0)
    await eventually(lease.lost.is_set, timeout=3, what="the refused renewal to lose the lease")
    await lease.release()
    assert await store.lease_holder("ingest:src1") == "b", "releasing a lost lease leaves the new holder alone"


async def test_a_fenced_leader_keeps_leading_through_an_outage_and_retakes_a_forgotten_lease() -> None:
    store = InMemoryCoordinationStore()
    lease = LeaderLease(store, "ingest:src1", "a", ttl=1.0, renew_every=0.1, hold_through_outage=True)
    assert await lease.acquire(asyncio.Event())
    store.unavailable = True
    await asyncio.sleep(3 * lease.ttl)  # an outage longer than the ttl: an unfenced lease would be lost
    assert not lease.lost.is_set() and lease.is_leader
    store.clear()  # the store comes back empty, as a Redis without persistence does after a restart
    store.unavailable = False
    async def retaken() -> bool:
        return await store.lease_holder("ingest:src1") == "a"

    await eventually(retaken, timeout=3,
                     what="the leader to take its forgotten lease again")
    assert not lease.lost.is_set()
    await lease.release()


async def test_a_fenced_leader_steps_down_when_another_took_the_lease_during_the_outage() -> None:
    store = InMemoryCoordinationStore()
    lease = LeaderLease(store, "ingest:src1", "a", ttl=1.0, renew_every=0.1, hold_through_outage=True)
    assert await lease.acquire(asyncio.Event())
    store.unavailable = True
    await asyncio.sleep(0.3)
    store.clear()
    store.unavailable = False
    assert await store.acquire_lease("ingest:src1", "b", ttl=10.0)  # b reached the store first
    await eventually(lease.lost.is_set, timeout=3, what="a to step down for b")
    assert await store.lease_holder("ingest:src1") == "b"
    await lease.release()


async def test_acquire_gives_up_when_stopped() -> None:
    store = InMemoryCoordinationStore()
    assert await store.acquire_lease("ingest:src1", "other", ttl=30.0)
    stop = asyncio.Event()
    lease = LeaderLease(store, "ingest:src1", "a", ttl=3.0, renew_every=1.0)
    waiting = asyncio.create_task(lease.acquire(stop))
    stop.set()
    assert await asyncio.wait_for(waiting, 3) is False


def test_renewals_must_be_frequent_enough() -> None:
    with pytest.raises(ValueError, match="renew_every"):
        LeaderLease(InMemoryCoordinationStore(), "l", "a", ttl=3.0, renew_every=2.0)


# Ids and URLs

def test_default_instance_ids_are_unique_and_key_safe() -> None:
    ids = {default_instance_id("fanout") for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"[a-z0-9._-]+-\d+-[0-9a-f]{6}", i) for i in ids), ids


def test_urls_in_messages_hide_the_password() -> None:
    assert redact_url("redis://user:s3cret@cache:6380/0") == "redis://user:***@cache:6380/0"
    assert redact_url("redis://:s3cret@cache/1") == "redis://:***@cache/1"
    assert redact_url("redis://cache:6379/0") == "redis://cache:6379/0"


# The fake's faults

async def test_an_unavailable_fake_refuses_every_call() -> None:
    store = InMemoryCoordinationStore()
    store.unavailable = True
    calls = [
        store.heartbeat(InstanceStatus("ingest", "i1"), 5.0), store.deregister("ingest", "i1"), store.instances(),
        store.acquire_lease("l", "a", 5.0), store.renew_lease("l", "a", 5.0), store.release_lease("l", "a"),
        store.lease_holder("l"), store.send_command("ingest:s", CommandKind.PAUSE),
        store.command_result("x", 1.0), store.publish_event(Event("state")),
    ]
    for call in calls:
        with pytest.raises(CoordinationUnavailable):
            await call
    with pytest.raises(CoordinationUnavailable):
        await store.commands("ingest:s", "c1").join()


async def test_fake_command_iterator_waits_out_an_outage() -> None:
    store = InMemoryCoordinationStore()
    subscription = store.commands("ingest:src1", "c1")
    store.unavailable = True
    receiving = asyncio.create_task(anext(subscription))
    await eventually(lambda: not receiving.done(), what="the iterator to wait during the outage")
    store.unavailable = False
    command_id = await store.send_command("ingest:src1", CommandKind.RESUME)
    assert (await asyncio.wait_for(receiving, 5)).command_id == command_id
    await subscription.aclose()


async def test_fake_ttls_follow_its_clock_and_calls_can_be_delayed() -> None:
    clock = ManualClock()
    store = InMemoryCoordinationStore(clock=clock)
    await store.heartbeat(InstanceStatus("ingest", "i1"), ttl=10.0)
    [instance] = await store.instances()
    assert instance.heartbeat_unix_ms == int(clock.now * 1000)
    clock.advance(9.9)
    assert len(await store.instances()) == 1
    clock.advance(0.2)
    assert await store.instances() == []

    store.delay = 0.5
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await store.lease_holder("l")
