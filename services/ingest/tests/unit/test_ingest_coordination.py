"""Leader lease, commands and heartbeats of ingest against the in-memory coordination store."""

from __future__ import annotations

import asyncio

import pytest

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import CommandKind, CommandStatus
from laredo_testing.eventually import eventually

from laredo_ingest.application.control import ControlAction, IngestControl
from laredo_ingest.application.coordination import CoordinationSettings, IngestCoordinator, reload_tables
from laredo_ingest.application.status import IngestPhase, IngestStatus

SETTINGS = CoordinationSettings(leader_election=True, commands=True, heartbeats=True, lease_ttl=2.0,
                                lease_renew_every=0.5, heartbeat_interval=0.2)


class Instance:
    """A coordinator whose 'service' records when it runs and answers control requests."""

    def __init__(self, store: InMemoryCoordinationStore, name: str, running: list[str]) -> None:
        self.status, self.control = IngestStatus(), IngestControl()
        self.coordinator = IngestCoordinator(store, SETTINGS, source_id="main", instance_id=name,
                                             status=self.status, control=self.control)
        self.name, self.running, self.stop = name, running, asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def service(self, stop: asyncio.Event) -> None:
        self.running.append(self.name)
        assert len(self.running) == 1, f"two instances stream at once: {self.running}"
        try:
            while not stop.is_set():
                request = self.control.take()
                if request is not None:
                    self.control.finish(request, f"{request.action.value} done by {self.name}")
                    continue
                waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.control.wakeup.wait())]
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for wait in waits:
                    wait.cancel()
        finally:
            self.running.remove(self.name)

    def start(self) -> None:
        self.task = asyncio.create_task(self.coordinator.run(self.stop, self.service))

    async def crash(self) -> None:
        """Die without releasing anything (the renewal stops with the process)."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def test_one_leader_streams_and_a_standby_takes_over_when_it_dies() -> None:
    store, running = InMemoryCoordinationStore(), []
    a, b = Instance(store, "a", running), Instance(store, "b", running)
    a.start()
    await eventually(lambda: running == ["a"], what="a leads")
    b.start()
    await eventually(lambda: b.status.phase is IngestPhase.STANDBY, what="b waits")
    assert running == ["a"] and not b.status.is_leader
    async def both_heartbeat() -> bool:
        return {i.instance_id for i in await store.instances("ingest")} == {"a", "b"}

    await eventually(both_heartbeat, what="both heartbeat")
    await a.crash()
    await eventually(lambda: running == ["b"], timeout=10, what="b took over")
    assert b.status.is_leader
    b.stop.set()
    await asyncio.wait_for(b.task, 5)
    assert await store.lease_holder("ingest:main") is None


async def test_a_leader_that_cannot_renew_stops_and_nobody_streams_until_the_store_is_back() -> None:
    store, running = InMemoryCoordinationStore(), []
    a = Instance(store, "a", running)
    a.start()
    await eventually(lambda: running == ["a"], what="a leads")
    store.unavailable = True
    await eventually(lambda: running == [], timeout=10, what="a stopped streaming")
    assert a.status.phase is IngestPhase.STANDBY and not a.status.is_leader
    store.unavailable = False
    await eventually(lambda: running == ["a"], timeout=10, what="a leads again")
    a.stop.set()
    await asyncio.wait_for(a.task, 5)


async def test_commands_reach_the_leader_and_get_results() -> None:
    store, running = InMemoryCoordinationStore(), []
    a = Instance(store, "a", running)
    a.start()
    await eventually(lambda: running == ["a"], what="a leads")
    reload_id = await store.send_command("ingest:main", CommandKind.RELOAD, {"schema": "public", "table": "t"})
    pause_id = await store.send_command("ingest:main", CommandKind.PAUSE)
    other_id = await store.send_command("ingest:main", CommandKind.SNAPSHOT)
    reload, pause, other = [await store.command_result(c, 10) for c in (reload_id, pause_id, other_id)]
    assert (reload.status, reload.message, reload.executed_by) == (CommandStatus.SUCCEEDED, "reload done by a", "a")
    assert pause.status is CommandStatus.SUCCEEDED and other.status is CommandStatus.REJECTED
    a.stop.set()
    await asyncio.wait_for(a.task, 5)


@pytest.mark.parametrize(("args", "tables"), [
    ({"schema": "s", "table": "t"}, ["s.t"]), ({"table": "t"}, ["public.t"]),
    ({"tables": ["a.b", "c.d"]}, ["a.b", "c.d"]), ({}, []),
])
def test_reload_arguments(args: dict, tables: list[str]) -> None:
    assert [str(t) for t in reload_tables(args)] == tables


async def test_abandoned_requests_fail_retryably() -> None:
    control = IngestControl()
    waiting = asyncio.create_task(control.pause())
    await eventually(lambda: control.wakeup.is_set(), what="queued")
    control.abandon("no longer the leader")
    with pytest.raises(Exception, match="pause not carried out: no longer the leader") as info:
        await waiting
    assert info.value.retryable and ControlAction.PAUSE.value == "pause"
