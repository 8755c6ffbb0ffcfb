"""InstanceCoordinator: shared and own command targets, answers stored, redelivery after an outage, rebuilds,
deregistering."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from laredo_core.coordination.instance import CommandAnswer, InstanceCoordinator, SharedTarget
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus
from laredo_testing.eventually import eventually


class Executions:
    """The execute callable of one instance: records what it ran and answers SUCCEEDED (DRAIN) or REJECTED."""

    def __init__(self, log: list[tuple[str, str]], instance_id: str) -> None:
        self.log = log
        self.instance_id = instance_id
        self.before_answer: list[Any] = []

    async def __call__(self, command: Command) -> CommandAnswer:
        self.log.append((self.instance_id, command.command_id))
        for hook in self.before_answer:
            hook()
        if command.kind is CommandKind.DRAIN:
            return CommandStatus.SUCCEEDED, f"drained by {self.instance_id}", {"n": len(self.log)}
        return CommandStatus.REJECTED, f"no {command.kind.value} here", {}


def status() -> Mapping[str, Any]:
    return {"ready": True}


@asynccontextmanager
async def running(store: InMemoryCoordinationStore, shared: SharedTarget,
                  *instance_ids: str) -> AsyncIterator[tuple[list[tuple[str, str]], dict[str, Executions]]]:
    log: list[tuple[str, str]] = []
    executions = {i: Executions(log, i) for i in instance_ids}
    coordinators = [InstanceCoordinator(store, "svc", i, status, executions[i], heartbeat_interval=30.0, shared=shared)
                    for i in instance_ids]
    tasks = [asyncio.create_task(c.run()) for c in coordinators]
    try:
        await eventually(lambda: all(e.is_set() for c in coordinators for e in c.joined.values()),
                         what="every instance reading both of its targets")
        yield log, executions
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_shared_target_is_a_broadcast_and_the_own_target_reaches_one_instance() -> None:
    store = InMemoryCoordinationStore(block=0.05)
    async with running(store, SharedTarget.EVERY_INSTANCE, "a", "b") as (log, _):
        assert {i.instance_id for i in await store.instances("svc")} == {"a", "b"}
        broadcast = await store.send_command("svc:*", CommandKind.DRAIN)
        await eventually(lambda: sorted(log) == [("a", broadcast), ("b", broadcast)],
                         what="both instances executing the broadcast")
        own = await store.send_command("svc:b", CommandKind.SNAPSHOT)
        result = await store.command_result(own, timeout=5)
        assert result is not None and result.status is CommandStatus.REJECTED and result.executed_by == "b"
        assert result.message == "no snapshot here" and result.finished_unix_ms > 0
        assert [entry for entry in log if entry[1] == own] == [("b", own)]
    assert await store.instances("svc") == []  # each deregistered when it stopped


async def test_one_instance_does_each_command_of_a_shared_work_target() -> None:
    store = InMemoryCoordinationStore(block=0.05)
    async with running(store, SharedTarget.ONE_INSTANCE, "a", "b") as (log, _):
        sent = [await store.send_command("svc:*", CommandKind.DRAIN) for _ in range(6)]
        results = [await store.command_result(command_id, timeout=5) for command_id in sent]
        assert all(r is not None and r.status is CommandStatus.SUCCEEDED for r in results)
        assert sorted(command_id for _, command_id in log) == sorted(sent)  # each executed once, by one of them


async def test_a_result_not_stored_in_an_outage_is_executed_again_and_stored(
        caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryCoordinationStore(block=0.05, claim_idle=0.2)
    async with running(store, SharedTarget.EVERY_INSTANCE, "a") as (log, executions):
        def outage_once() -> None:
            executions["a"].before_answer.clear()
            store.unavailable = True  # the answer cannot be stored

        executions["a"].before_answer.append(outage_once)
        with caplog.at_level(logging.WARNING, logger="laredo_core.coordination.instance"):
            command_id = await store.send_command("svc:a", CommandKind.DRAIN)
            await eventually(lambda: "not stored" in caplog.text, what="the lost result logged")
        store.unavailable = False
        result = await store.command_result(command_id, timeout=5)
        assert result is not None and result.status is CommandStatus.SUCCEEDED
        assert log == [("a", command_id), ("a", command_id)]  # redelivered, executed again


class FakeRebuilds:
    """Stands in for InstanceRebuilds: answers RESTORE, reports one rebuild, records being closed."""

    def __init__(self) -> None:
        self.on_change: Any = None
        self.closed = False

    async def execute(self, command: Command) -> CommandResult | None:
        if command.kind is not CommandKind.RESTORE:
            return None
        return CommandResult(command.command_id, CommandStatus.SUCCEEDED, "restore started", executed_by="a")

    def report(self) -> dict[str, Any]:
        return {"restore-1": {"state": "running"}}

    async def aclose(self) -> None:
        self.closed = True


async def test_rebuilds_answer_their_commands_show_in_the_status_and_stop_with_the_instance() -> None:
    store = InMemoryCoordinationStore(block=0.05)
    log: list[tuple[str, str]] = []
    rebuilds = FakeRebuilds()
    coordinator = InstanceCoordinator(store, "svc", "a", status, Executions(log, "a"), heartbeat_interval=30.0,
                                      rebuilds=rebuilds)  # type: ignore[arg-type]
    assert rebuilds.on_change == coordinator.heartbeat.poke
    assert coordinator.status() == {"ready": True, "replays": {"restore-1": {"state": "running"}}}
    restore = await coordinator.execute(Command("c1", "svc:a", CommandKind.RESTORE))
    drain = await coordinator.execute(Command("c2", "svc:a", CommandKind.DRAIN))
    assert (restore.message, drain.message) == ("restore started", "drained by a")
    assert log == [("a", "c2")]  # the service saw only the command that is its own
    task = asyncio.create_task(coordinator.run())
    await eventually(lambda: store.instances("svc"), what="the instance registered")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert rebuilds.closed and await store.instances("svc") == []
