"""Drain: GoAway, streaming until the deadline, unready; the OAM command path through the coordination store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from laredo_testing.eventually import eventually

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import CommandKind, CommandStatus
from laredo_fanout.application.client_registry import ClientState
from laredo_fanout.application.coordination import FanoutCoordinator
from laredo_fanout.application.snapshots import SnapshotPolicy
from laredo_fanout.domain.errors import TargetDrained
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import insert, row

MakeWorld = Callable[..., World]


async def test_drained_streams_get_go_away_keep_streaming_and_end_at_the_deadline(make_world: MakeWorld) -> None:
    world = make_world()
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    clients = [world.sync(client_id=f"c{i}") for i in range(3)]
    await eventually(lambda: all(c.snapshot_done for c, _ in clients), what="every snapshot")
    assert world.targets.readiness()[0]
    deadline = world.clock.now() + 0.5
    assert world.targets.drain("", "", "admin", deadline) == [world.replica.table]
    await eventually(lambda: all(c.go_away is not None for c, _ in clients), what="GoAway on every stream")
    assert clients[0][0].go_away.reason == "admin"  # type: ignore[union-attr]
    assert clients[0][0].go_away.drain_deadline_unix_ms == int(deadline * 1000)  # type: ignore[union-attr]
    assert {c.state for c in world.replica.clients.clients()} == {ClientState.DRAINING}
    ready, details = world.targets.readiness()
    assert not ready and details["tables"]["public.items"]["draining"] == "admin"

    world.publish(world.batches.transaction(insert(row(2))))  # streaming goes on until the deadline
    await eventually(lambda: all(c.sequences == [2] for c, _ in clients), what="the entry after GoAway")
    await asyncio.wait_for(asyncio.gather(*(task for _, task in clients)), 5)  # clean end, no error
    await asyncio.wait_for(world.targets.wait_clients_gone(), 1)
    with pytest.raises(TargetDrained, match="drained; connect to another instance"):
        await world.sync()[1]


async def test_a_drain_without_deadline_lasts_until_clients_leave(make_world: MakeWorld) -> None:
    world = make_world()
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    client, task = world.sync()
    await eventually(lambda: client.snapshot_done, what="the snapshot")
    world.targets.drain("public", "items", "draining", 0.0)
    world.targets.drain("public", "items", "admin", 0.0)  # idempotent: the first notice stays
    await eventually(lambda: client.go_away is not None, what="GoAway")
    assert client.go_away.reason == "draining" and client.go_away.drain_deadline_unix_ms == 0  # type: ignore
    await asyncio.sleep(0.05)
    assert not task.done()
    task.cancel()  # the client leaves
    await asyncio.wait_for(world.targets.wait_clients_gone(), 1)


async def test_drain_and_snapshot_commands_from_the_coordination_store(make_world: MakeWorld) -> None:
    world = make_world(snapshot_policy=SnapshotPolicy(interval=0))
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    await eventually(lambda: world.replica.ready, what="the table ready")
    store = InMemoryCoordinationStore(block=0.05)
    coordinator = FanoutCoordinator(store, "fanout-a", world.targets, world.clock, heartbeat_interval=0.05)
    world.tasks.append(asyncio.create_task(coordinator.run()))
    await eventually(lambda: store.instances("fanout"), what="the instance registered")
    (instance,) = await store.instances("fanout")
    assert instance.instance_id == "fanout-a" and instance.status["ready"] is True

    snapshot_id = await store.send_command("fanout:fanout-a", CommandKind.SNAPSHOT, {"tables": ["public.items"]})
    result = await store.command_result(snapshot_id, timeout=5)
    assert result is not None and result.status is CommandStatus.SUCCEEDED and result.executed_by == "fanout-a"
    assert result.details["snapshots"]["public.items"]
    rejected = await store.command_result(await store.send_command("fanout:fanout-a", CommandKind.PAUSE), 5)
    assert rejected is not None and rejected.status is CommandStatus.REJECTED

    await asyncio.wait_for(coordinator.joined["fanout:*"].wait(), 5)  # a broadcast reaches joined readers only
    deadline_ms = int((world.clock.now() + 60) * 1000)
    everyone = await store.command_result(await store.send_command("fanout:*", CommandKind.DRAIN, {}), 5)
    assert everyone is not None and everyone.status is CommandStatus.REJECTED
    assert "names its instance" in everyone.message
    other = await store.command_result(await store.send_command("fanout:fanout-a", CommandKind.DRAIN,
                                                                {"instance_id": "fanout-b"}), 5)
    assert other is not None and other.status is CommandStatus.REJECTED and "fanout-b, not to fanout-a" in other.message
    assert world.replica.drain is None  # neither was addressed to this instance alone
    drain_id = await store.send_command("fanout:fanout-a", CommandKind.DRAIN,
                                        {"schema": "", "table": "", "deadline_unix_ms": deadline_ms,
                                         "instance_id": "fanout-a"})
    drained = await store.command_result(drain_id, timeout=5)
    assert drained is not None and drained.status is CommandStatus.SUCCEEDED
    assert drained.details == {"tables": ["public.items"], "drain_deadline_unix_ms": deadline_ms}
    assert world.replica.drain is not None and world.replica.drain.reason == "admin"

    async def reported_draining() -> bool:
        (instance,) = await store.instances("fanout")
        return instance.status["draining"] is True and instance.status["ready"] is False

    await eventually(reported_draining, what="the heartbeat to report the drain")
