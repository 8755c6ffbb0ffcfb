"""The front door's Envoy runs under SCHED_BATCH (front_door.batch_scheduling, on by default): every one of its
threads, from its start and again after it was restarted; with the setting off, under the default policy."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from laredo_testing.eventually import eventually

from laredo_core.config import load_settings
from laredo_core.frontdoor.envoy_process import EnvoyFrontDoor, batch_schedule
from laredo_core.frontdoor.settings import FrontDoorSettings

pytestmark = pytest.mark.integration


def policies(pid: int) -> dict[int, int]:
    """Each thread's scheduling policy."""
    return {int(tid): os.sched_getscheduler(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")}


@asynccontextmanager
async def started(settings: FrontDoorSettings) -> AsyncIterator[EnvoyFrontDoor]:
    door = EnvoyFrontDoor(settings, "127.0.0.1", 0, name="scheduling-test")
    try:
        await door.start()
        yield door
    finally:
        await door.stop()


@pytest.fixture
async def batch_door() -> AsyncIterator[EnvoyFrontDoor]:
    async with started(FrontDoorSettings()) as door:
        yield door


def envoy_pid(door: EnvoyFrontDoor) -> int:
    assert door._process is not None  # noqa: SLF001 - the process this test inspects
    return door._process.pid  # noqa: SLF001


async def test_every_envoy_thread_runs_under_sched_batch(batch_door: EnvoyFrontDoor) -> None:
    threads = policies(envoy_pid(batch_door))
    assert len(threads) > 2, "Envoy's main thread, its worker and its helpers"
    assert set(threads.values()) == {os.SCHED_BATCH}, threads


async def test_a_restarted_envoy_runs_under_sched_batch_too(batch_door: EnvoyFrontDoor) -> None:
    first = envoy_pid(batch_door)
    os.kill(first, signal.SIGKILL)
    await eventually(lambda: envoy_pid(batch_door) != first and len(policies(envoy_pid(batch_door))) > 2,
                     timeout=20, what="Envoy started again")
    assert set(policies(envoy_pid(batch_door)).values()) == {os.SCHED_BATCH}


async def test_without_batch_scheduling_envoy_keeps_the_default_policy() -> None:
    async with started(replace(FrontDoorSettings(), batch_scheduling=False)) as door:
        assert set(policies(envoy_pid(door)).values()) == {os.SCHED_OTHER}


def test_batch_schedule_skips_a_process_that_ended() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert batch_schedule(pid) == 0


def test_batch_scheduling_is_read_from_the_configuration(tmp_path: Path) -> None:
    path = tmp_path / "laredo.conf"
    path.write_text("front_door { batch_scheduling = false }\n")
    assert load_settings(path, env={}).front_door.batch_scheduling is False
    path.write_text("")
    assert load_settings(path, env={}).front_door.batch_scheduling is True


async def test_a_refused_policy_is_logged_once_and_the_door_serves(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    async with started(FrontDoorSettings()) as door:
        assert door.port > 0
        assert set(policies(envoy_pid(door)).values()) == {os.SCHED_OTHER}
    warnings = [r.getMessage() for r in caplog.records if "SCHED_BATCH" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "Operation not permitted" in warnings[0] and "front_door.batch_scheduling = false" in warnings[0]
