"""The OAM snapshot command: a new snapshot even when unchanged, user_meta in the manifest, ids and reasons back."""

from __future__ import annotations

from collections.abc import Callable

from laredo_testing.eventually import eventually

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import Command, CommandKind, CommandStatus
from laredo_fanout.adapters.memory import MemorySnapshotStore
from laredo_fanout.application.coordination import FanoutCoordinator
from laredo_fanout.application.snapshots import SnapshotPolicy
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import TABLE, row

MakeWorld = Callable[..., World]


def snapshot_command(**args: object) -> Command:
    return Command("c-1", "fanout:fanout-a", CommandKind.SNAPSHOT, args)


def coordinator(world: World) -> FanoutCoordinator:
    return FanoutCoordinator(InMemoryCoordinationStore(), "fanout-a", world.targets, world.clock)


async def test_the_command_writes_a_new_snapshot_with_user_meta_even_when_unchanged(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = make_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0))
    world.publish(world.batches.baseline([row(1), row(2)]))
    world.start()
    await eventually(lambda: world.replica.ready, what="the table ready")
    first = await world.targets.snapshots[TABLE].take()
    assert first is not None and first.user_meta == {}

    world.clock.advance(1)
    result = await coordinator(world).execute(snapshot_command(tables=["public.items"],
                                                               user_meta={"reason": "upgrade", "n": 2}))
    assert result.status is CommandStatus.SUCCEEDED, result.message
    snapshot_id = result.details["snapshots"]["public.items"]
    assert snapshot_id != first.snapshot_id and result.details["failed"] == {}
    assert f"public.items: snapshot {snapshot_id}" in result.message
    manifest = await store.read_manifest(TABLE, snapshot_id)
    assert manifest is not None and manifest.user_meta == {"reason": "upgrade", "n": 2}
    assert (manifest.row_count, manifest.source_position) == (2, first.source_position)


async def test_a_table_that_is_not_loaded_fails_with_the_reason(make_world: MakeWorld) -> None:
    world = make_world(snapshot_policy=SnapshotPolicy(interval=0))  # nothing published: not ready
    result = await coordinator(world).execute(snapshot_command(tables=[]))
    assert result.status is CommandStatus.FAILED
    assert result.details["snapshots"] == {} and "not loaded yet" in result.details["failed"]["public.items"]


async def test_store_failures_and_unknown_tables_are_reported_not_raised(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = make_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0))
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    await eventually(lambda: world.replica.ready, what="the table ready")
    store.unavailable = True
    failed = await coordinator(world).execute(snapshot_command(tables=["public.items", "public.nope"]))
    assert failed.status is CommandStatus.FAILED and failed.details["missing"] == ["public.nope"]
    assert "snapshot store failed" in failed.details["failed"]["public.items"]
    rejected = await coordinator(world).execute(snapshot_command(tables=["public.nope"]))
    assert rejected.status is CommandStatus.REJECTED and "public.nope" in rejected.message
    bad = await coordinator(world).execute(snapshot_command(user_meta=["not", "an", "object"]))
    assert bad.status is CommandStatus.FAILED and "user_meta must be a JSON object" in bad.message
