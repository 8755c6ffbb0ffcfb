"""Restores and replays of a fan-out table (laredo_core.rebuild + application/rebuild.py) in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from laredo_testing.eventually import eventually

from laredo_kernel.changes import Action, ColumnInfo, RowChange
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus
from laredo_kernel.position import Position
from laredo_core.rebuild.gate import GatedSink
from laredo_core.rebuild.instance import InstanceRebuilds
from laredo_core.rebuild.pacing import ReplaySpeed
from laredo_core.rebuild.records import RebuildKind, RebuildPhase, RebuildRequest, outcome_id
from laredo_core.rebuild.runner import RebuildLimits
from laredo_core.stream.memory_tail import MemoryStreamTail
from laredo_fanout.adapters.memory import MemorySnapshotStore, SilentObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.application.rebuild import FanoutRebuildTarget
from laredo_fanout.application.snapshots import SnapshotPolicy
from laredo_fanout.ports import FeedSubscription
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import COLUMNS, TABLE, Batches, delete, insert, row, update

MakeWorld = Callable[..., World]


class Rig:
    """A fan-out table fed through a GatedSink, its snapshots, and the instance's rebuilds."""

    def __init__(self, world: World, **limits: Any) -> None:
        self.world = world
        self.store = InMemoryCoordinationStore()
        self.gate = GatedSink(world.replicator)
        snapshots = world.targets.snapshots[TABLE]
        self.snapshots = snapshots
        self.tail = MemoryStreamTail(world.feed, json_values=True)
        self.rebuilds = InstanceRebuilds(
            "fanout", "f1", {TABLE: FanoutRebuildTarget(
                world.replica, ProtobufSyncEncoder(), world.clock, SilentObserver())},
            {TABLE: snapshots.store}.get, self.tail, self.gate, coordination=self.store,
            limits=RebuildLimits(**{"wait_timeout": 5.0, "poll_interval": 0.01, **limits}))
        world.tasks.append(asyncio.create_task(world.feed.run([FeedSubscription("pg", TABLE)], self.gate)))

    async def command(self, kind: CommandKind, **args: Any) -> CommandResult:
        result = await self.rebuilds.execute(Command(f"c-{kind.value}-{args.get('rebuild_id')}", "fanout:f1", kind,
                                                     args))
        assert result is not None
        return result

    async def restore(self, snapshot_id: str, rebuild_id: str = "restore-1", **extra: Any) -> CommandResult:
        request = RebuildRequest(rebuild_id, RebuildKind.RESTORE, snapshot_id, TABLE)
        return await self.command(CommandKind.RESTORE, **{**request.to_args(), **extra})

    def report(self, rebuild_id: str) -> dict[str, Any]:
        return self.rebuilds.report()[rebuild_id]

    async def ended(self, rebuild_id: str) -> dict[str, Any]:
        return await eventually(lambda: (r := self.report(rebuild_id))["state"] != "running" and r,
                                what=f"rebuild {rebuild_id} ended")

    def rows(self) -> dict[Any, dict[str, Any]]:
        state = self.world.replica.state
        return {state.values_of(r)["id"]: dict(state.values_of(r)) for r in state.rows()}


async def loaded(make_world: MakeWorld, rows: int = 5, **limits: Any) -> Rig:
    world = make_world(snapshot_store=MemorySnapshotStore(), snapshot_policy=SnapshotPolicy(interval=0))
    world.publish(world.batches.baseline([row(i) for i in range(1, rows + 1)]))
    rig = Rig(world, **limits)
    await eventually(lambda: world.replica.ready, what="the table loaded")
    return rig


def corrupt(rig: Rig) -> None:
    """What a consumer bug does: the live rows drift from the stream without any journal entry."""
    state = rig.world.replica.state
    state.apply(RowChange(Position(1, 0), Action.DELETE, {"id": 4}, None))
    state.apply(RowChange(Position(1, 0), Action.UPDATE, None, {"id": 1, "name": "wrong", "doc": "d"}))
    state.apply(RowChange(Position(1, 0), Action.INSERT, None, {"id": 9999, "name": "ghost", "doc": None}))


async def test_restore_repairs_drift_and_connected_clients_see_contiguous_changes(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    rig.world.publish(rig.world.batches.transaction(update(row(2, "two"))), rig.world.batches.transaction(
        insert(row(6)), delete(row(3))))
    await eventually(lambda: rig.world.replica.journal.current_sequence == 8, what="the changes after the snapshot")
    expected = rig.rows()
    corrupt(rig)
    client, _ = rig.world.sync()
    await eventually(lambda: client.snapshot_done, what="the client's snapshot")
    sequence_before = rig.world.replica.journal.current_sequence

    result = await rig.restore(manifest.snapshot_id)
    assert result.status is CommandStatus.SUCCEEDED, result.message
    report = await rig.ended("restore-1")

    assert report["state"] == "completed", report
    assert report["changes"] == 3 and report["rows_replayed"] == 5 + 3  # snapshot rows + tail changes
    assert rig.rows() == expected
    await eventually(lambda: len(client.sequences) == 3, what="the three repairs reached the client")
    assert client.sequences == [sequence_before + 1, sequence_before + 2, sequence_before + 3]
    assert {k: v for k, v in client.rows.items()} == {float(k): {c: float(x) if isinstance(x, int) else x
                                                                 for c, x in v.items() if x is not None}
                                                      for k, v in expected.items()}
    outcome = await rig.store.command_result(outcome_id("restore-1", "fanout", "f1"), 1)
    assert outcome is not None and outcome.details["state"] == "completed"


async def test_restore_of_an_unchanged_table_changes_nothing(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    rig.world.publish(rig.world.batches.transaction(update(row(5, "five"))))
    await eventually(lambda: rig.world.replica.journal.current_sequence == 6, what="the update applied")
    await rig.restore(manifest.snapshot_id)
    report = await rig.ended("restore-1")
    assert (report["state"], report["changes"]) == ("completed", 0)
    assert rig.world.replica.journal.current_sequence == 6
    assert not rig.world.replica.state.baseline_in_progress


async def test_live_changes_during_the_install_are_held_and_applied_after_it(make_world: MakeWorld) -> None:
    rig = await loaded(make_world, rows=300, install_slice=1)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    corrupt(rig)
    await rig.restore(manifest.snapshot_id)
    rebuild = rig.rebuilds._entries["restore-1"].rebuild
    await eventually(lambda: rebuild.progress.phase is RebuildPhase.INSTALLING, interval=0.0005,
                     what="the install started")
    rig.world.publish(rig.world.batches.transaction(update(row(1, "changed while installing"))),
                      rig.world.batches.transaction(insert(row(400))))
    report = await rig.ended("restore-1")
    assert report["state"] == "completed"
    await eventually(lambda: 400 in rig.rows(), what="the held insert applied")
    assert rig.rows()[1]["name"] == "changed while installing" and 4 in rig.rows() and 9999 not in rig.rows()
    positions = [e.position for e in rig.world.replica.journal.entries_after(0, 10_000)]
    assert positions == sorted(positions)


async def test_a_full_hold_finishes_the_install_at_once(make_world: MakeWorld) -> None:
    rig = await loaded(make_world, rows=300, install_slice=1, hold_limit=1)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    corrupt(rig)
    await rig.restore(manifest.snapshot_id)
    rebuild = rig.rebuilds._entries["restore-1"].rebuild
    await eventually(lambda: rebuild.progress.phase is RebuildPhase.INSTALLING, interval=0.0005,
                     what="the install started")
    rig.world.publish(*(rig.world.batches.transaction(update(row(i, f"x{i}"))) for i in (1, 2, 3)))
    assert (await rig.ended("restore-1"))["state"] == "completed"
    assert [rig.rows()[i]["name"] for i in (1, 2, 3)] == ["x1", "x2", "x3"] and 4 in rig.rows()


async def test_columns_that_do_not_fit_are_refused_unless_the_check_is_skipped(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    wider = Batches(columns=(*COLUMNS, ColumnInfo("extra", 23, "int4")))
    rig.world.publish(wider.transaction(wider.insert({**row(7), "extra": 1})))
    await eventually(lambda: len(rig.world.replica.columns) == 4, what="the new column")
    refused = await rig.restore(manifest.snapshot_id)
    assert refused.status is CommandStatus.FAILED
    assert "column 'extra' is in the table but not in the snapshot" in refused.message
    accepted = await rig.restore(manifest.snapshot_id, "restore-2", skip_meta_check=True)
    assert accepted.status is CommandStatus.SUCCEEDED
    assert accepted.details["warnings"] == ["column 'extra' is in the table but not in the snapshot (its rows will "
                                            "lack it)"]
    assert (await rig.ended("restore-2"))["state"] == "completed"
    assert rig.rows()[7]["extra"] == 1


async def test_a_slow_replay_stops_and_leaves_the_live_table_unchanged(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    batches = rig.world.batches
    rig.world.publish(batches.transaction(update(row(1, "a")), commit_time_unix_us=1_700_000_000_000_000),
                      batches.transaction(update(row(2, "b")), commit_time_unix_us=1_700_000_001_000_000))
    await eventually(lambda: rig.rows()[2]["name"] == "b", what="the tail applied live")
    corrupt(rig)
    drifted = rig.rows()
    request = RebuildRequest("replay-1", RebuildKind.REPLAY, manifest.snapshot_id, TABLE, ReplaySpeed.parse("0.001x"))
    assert (await rig.command(CommandKind.REPLAY, **request.to_args())).status is CommandStatus.SUCCEEDED
    await eventually(lambda: rig.report("replay-1")["phase"] == "tail" and rig.report("replay-1")["rows_replayed"] == 6,
                     what="the replay waiting between the tail's commits")
    stopped = await rig.command(CommandKind.STOP_REPLAY, rebuild_id="replay-1")
    assert stopped.status is CommandStatus.SUCCEEDED and stopped.details["state"] == "stopped"
    assert rig.report("replay-1")["state"] == "stopped"
    assert rig.rows() == drifted and not rig.gate.held(TABLE)
    unknown = await rig.command(CommandKind.STOP_REPLAY, rebuild_id="replay-nope")
    assert unknown.status is CommandStatus.REJECTED


async def test_a_full_speed_replay_completes_with_its_rows_counted(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    rig.world.publish(rig.world.batches.transaction(insert(row(6)), insert(row(7))))
    request = RebuildRequest("replay-2", RebuildKind.REPLAY, manifest.snapshot_id, TABLE)
    await eventually(lambda: len(rig.world.replica.state) == 7, what="the inserts applied")
    await rig.command(CommandKind.REPLAY, **request.to_args())
    report = await rig.ended("replay-2")
    assert (report["state"], report["rows_replayed"], report["changes"]) == ("completed", 7, 0)


@pytest.mark.parametrize("problem", ["unknown snapshot", "tail removed", "other table"])
async def test_failures_are_reported(make_world: MakeWorld, problem: str) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshots.take()
    assert manifest is not None
    if problem == "unknown snapshot":
        result = await rig.restore("20990101T000000000Z-1-abcdef")
        assert result.status is CommandStatus.FAILED and "no such snapshot" in result.message
    elif problem == "other table":
        result = await rig.command(CommandKind.RESTORE, rebuild_id="r", snapshot_id=manifest.snapshot_id,
                                   schema="public", table="nope")
        assert result.status is CommandStatus.REJECTED
    else:
        rig.world.publish(rig.world.batches.transaction(insert(row(6))))
        await eventually(lambda: len(rig.world.replica.state) == 6, what="the insert applied")
        rig.world.feed.discard_through(rig.world.feed.last_sequence)
        assert (await rig.restore(manifest.snapshot_id)).status is CommandStatus.SUCCEEDED
        report = await rig.ended("restore-1")
        assert report["state"] == "error" and "were removed" in report["message"]
        assert 6 in rig.rows()
