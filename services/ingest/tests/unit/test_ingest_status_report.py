"""What ingest reports (heartbeat, readiness) tells the truth: real positions before the first change, a pause
with WAL waiting is neither ready nor caught up, and every baseline says why it was taken."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from laredo_kernel.position import format_lsn

from laredo_ingest.adapters.memory import WalBuilder
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.domain.baseline_reason import BaselineCause
from laredo_testing.eventually import eventually
from services.ingest.tests.unit.test_ingest_service import OPTIONS, USERS, World, ins, world  # noqa: F401 (fixture)

SLOT = "laredo_main"


async def test_positions_are_the_slots_own_before_the_first_change(world: World) -> None:
    service, stop = world.service(), asyncio.Event()
    assert (service.status.report()["received_lsn"], service.status.report()["confirmed_lsn"]) == ("", "")
    task = asyncio.create_task(service.run(stop))
    try:
        await eventually(lambda: service.status.ready, what="ready")
        report = service.status.report()
        consistent = format_lsn(world.source.slots[SLOT].confirmed_flush_lsn)
        assert (report["received_lsn"], report["confirmed_lsn"]) == (consistent, consistent)
        assert consistent != format_lsn(0)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_paused_with_wal_waiting_is_not_ready_and_not_caught_up(world: World) -> None:
    service, stop = world.service(dataclasses.replace(OPTIONS, slot_check_interval=0.05)), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        await eventually(lambda: service.status.ready, what="ready")
        assert await service.control.pause() == "paused"
        world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
        await eventually(lambda: service.status.report().get("wal_waiting_since_unix_ms"),
                         what="the WAL written while paused seen waiting")
        report = service.status.report()
        assert not service.status.ready and report["phase"] == "paused" and report["paused"] is True
        assert report["lag_bytes"] > 0 and report["paused_since_unix_ms"] > 0
        assert await service.control.resume() == "resumed"
        await eventually(lambda: service.status.ready, what="ready again after resume")
        assert "paused_since_unix_ms" not in service.status.report()
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


def test_lag_seconds_grow_while_paused_wal_waits() -> None:
    status = IngestStatus(phase=IngestPhase.STREAMING, received_lsn=0x1000, lag_seconds=0.2)
    status.set_paused(True, now=100.0)
    status.observe_server_wal(0x1000, now=105.0)  # nothing beyond what was read
    assert status.current_lag_seconds(now=120.0) == 0.2
    status.observe_server_wal(0x2000, now=110.0)
    assert status.current_lag_seconds(now=130.0) == pytest.approx(20.0)
    status.set_paused(False)
    assert status.current_lag_seconds(now=130.0) == 0.2 and status.phase is IngestPhase.STREAMING


async def test_each_baseline_says_why_and_the_reason_outlives_a_restart(world: World) -> None:
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: service.status.ready, what="first baseline done")
    assert _cause(service.status) == "initial"
    await asyncio.wait_for(service.control.reload([USERS.table]), 5)
    assert _cause(service.status) == BaselineCause.OPERATOR_RELOAD.value
    await asyncio.wait_for(service.control.reset(), 5)
    await eventually(lambda: service.status.ready, what="ready after the reset")
    assert _cause(service.status) == "operator reset"
    stop.set()
    await asyncio.wait_for(task, 5)

    del world.source.slots[SLOT]  # someone drops the slot while ingest is down
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: service.status.ready, what="re-baselined after the dropped slot")
    assert _cause(service.status) == "slot dropped"
    assert f"replication slot {SLOT} was dropped" in service.status.report()["baselines"][str(USERS.table)]["detail"]
    end_lsn = world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])  # the WAL moves on past the stream
    await eventually(lambda: service.status.confirmed_lsn == end_lsn, what="the change confirmed")
    stop.set()
    await asyncio.wait_for(task, 5)

    service, stop = world.service(), asyncio.Event()  # resumes: no baseline, the last one's reason stays
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: service.status.ready, what="resumed")
    assert _cause(service.status) == "slot dropped"
    stop.set()
    await asyncio.wait_for(task, 5)


def _cause(status: IngestStatus) -> str:
    return str(status.report()["baselines"][str(USERS.table)]["cause"])
