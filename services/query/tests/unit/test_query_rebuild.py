"""Restores and replays of a query table (laredo_core.rebuild + application/rebuild.py) in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from laredo_testing.eventually import eventually

from laredo_kernel.changes import Action, ColumnInfo, RowChange
from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus
from laredo_kernel.jsonvalue import row_to_json
from laredo_kernel.position import Position
from laredo_core.rebuild.gate import GatedSink
from laredo_core.rebuild.instance import InstanceRebuilds
from laredo_core.rebuild.records import RebuildKind, RebuildRequest
from laredo_core.rebuild.runner import RebuildLimits
from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part
from laredo_core.snapshots.memory_store import MemorySnapshotStore
from laredo_core.stream.memory_tail import MemoryStreamTail
from laredo_query.application.rebuild import QueryRebuildTarget
from laredo_query.ports import FeedSubscription
from services.query.tests.query_testkit import TABLE, Batches, delete, insert, row, update
from services.query.tests.unit.conftest import World

MakeWorld = Callable[..., World]


class Rig:
    def __init__(self, world: World) -> None:
        self.world = world
        self.snapshots = MemorySnapshotStore()
        self.gate = GatedSink(world.applier)
        self.rebuilds = InstanceRebuilds(
            "query", "q1", {TABLE: QueryRebuildTarget(world.table, self.gate, world.clock)}, {TABLE: self.snapshots}.get,
            MemoryStreamTail(world.feed), self.gate, coordination=InMemoryCoordinationStore(),
            limits=RebuildLimits(wait_timeout=5.0, poll_interval=0.01))
        world.tasks.append(asyncio.create_task(world.feed.run([FeedSubscription("pg", TABLE)], self.gate)))

    async def snapshot(self, change: Callable[[dict[str, Any]], dict[str, Any]] = dict) -> SnapshotManifest:
        """What fan-out writes: the table's rows as JSON (each passed through `change`), at its position and
        stream sequence."""
        table = self.world.table
        rows = [change(row_to_json(r.values)) for r in table.indexed.rows()]
        part, data = encode_part(0, rows)
        checksum = Checksum()
        checksum.update(data)
        manifest = SnapshotManifest("20261122T110512345Z-0-abcdef", TABLE, table.indexed.columns,
                                    table.indexed.key_columns, len(rows), str(table.applied_position),
                                    self.gate.applied_sequence(TABLE), 0, 1_700_000_000.0, (part,), checksum.value)
        await self.snapshots.write_part(TABLE, manifest.snapshot_id, part.name, data)
        await self.snapshots.write_manifest(manifest)
        return manifest

    async def command(self, kind: CommandKind, request: RebuildRequest) -> CommandResult:
        result = await self.rebuilds.execute(Command("c1", "query:q1", kind, request.to_args()))
        assert result is not None
        return result

    async def ended(self, rebuild_id: str) -> dict[str, Any]:
        return await eventually(lambda: (r := self.rebuilds.report()[rebuild_id])["state"] != "running" and r,
                                what=f"rebuild {rebuild_id} ended")

    def rows(self) -> dict[Any, dict[str, Any]]:
        return {r.values["id"]: dict(r.values) for r in self.world.table.indexed.rows()}


async def loaded(make_world: MakeWorld) -> Rig:
    world = make_world()
    world.publish(Batches().baseline([row(i, qty=i) for i in range(1, 6)]))
    rig = Rig(world)
    await eventually(lambda: world.table.ready, what="the table loaded")
    return rig


async def test_restore_repairs_drift_and_subscribers_and_indexes_follow(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshot()
    batches = Batches()
    rig.world.publish(batches.transaction(update(row(2, "changed", qty=2))), batches.transaction(
        insert(row(6, qty=6)), delete(row(3, qty=3))))
    await eventually(lambda: 6 in rig.rows() and 3 not in rig.rows(), what="the changes after the snapshot")
    expected = rig.rows()
    indexed = rig.world.table.indexed
    indexed.apply(RowChange(Position(1, 0), Action.DELETE, {"id": 4}, None))  # drift: a consumer bug
    indexed.apply(RowChange(Position(1, 0), Action.UPDATE, None, {**row(1, "wrong", qty=1)}))
    subscription = rig.world.table.subscribers.open()

    result = await rig.command(CommandKind.RESTORE, RebuildRequest("restore-q", RebuildKind.RESTORE,
                                                                   manifest.snapshot_id, TABLE))
    assert result.status is CommandStatus.SUCCEEDED, result.message
    report = await rig.ended("restore-q")
    assert (report["state"], report["changes"], report["rows_replayed"]) == ("completed", 2, 5 + 3), report
    assert rig.rows() == expected
    assert [r.values["id"] for r in indexed.lookup("by_status", ["changed"])] == [2]
    assert [r.values["id"] for r in indexed.lookup("lookup", ["u4@example.com"])] == [4]
    events = [await subscription.next() for _ in range(2)]
    assert sorted((e.action.value, e.new.values["id"]) for e in events) == [("INSERT", 4), ("UPDATE", 1)]


TYPED = (ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
         ColumnInfo("amount", 1700, "numeric"), ColumnInfo("at", 1184, "timestamptz"), ColumnInfo("blob", 17, "bytea"),
         ColumnInfo("doc", 3802, "jsonb"), ColumnInfo("big", 20, "int8"), ColumnInfo("day", 1082, "date"),
         ColumnInfo("tags", 1007, "_int4"))


async def test_typed_values_round_trip_so_an_unchanged_table_gets_no_change(make_world: MakeWorld) -> None:
    world = make_world(definitions=())
    batches = Batches(columns=TYPED)
    world.publish(batches.baseline([{"id": str(i), "amount": f"{i}.50", "at": "2026-11-22 13:45:01.5+00",
                                     "blob": "\\x00ff", "doc": '{"a": [1, 2.5]}', "big": "9223372036854775807",
                                     "day": "infinity" if i % 2 else "2026-01-02", "tags": "{1,NULL,3}"}
                                    for i in range(1, 6)]))
    rig = Rig(world)
    await eventually(lambda: world.table.ready, what="the table loaded")
    manifest = await rig.snapshot()
    assert manifest.stream_sequence == 3  # BEGIN, one chunk of rows, END
    await rig.command(CommandKind.REPLAY, RebuildRequest("replay-q", RebuildKind.REPLAY, manifest.snapshot_id, TABLE))
    report = await rig.ended("replay-q")
    assert (report["state"], report["changes"], report["rows_replayed"]) == ("completed", 0, 5)
    assert rig.rows()[1]["amount"] == "1.50" and rig.rows()[2]["blob"] == "AP8="  # the values clients see


async def test_a_key_that_changed_is_refused(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    manifest = await rig.snapshot()
    await rig.snapshots.write_manifest(replace(manifest, snapshot_id="other", key_columns=("email",)))
    for part in manifest.parts:
        await rig.snapshots.write_part(TABLE, "other", part.name,
                                       await rig.snapshots.read_part(TABLE, manifest.snapshot_id, part.name))
    result = await rig.command(CommandKind.RESTORE, RebuildRequest("restore-k", RebuildKind.RESTORE, "other", TABLE))
    assert result.status is CommandStatus.FAILED
    assert "the key is (email) in the snapshot but (id) in the table" in result.message


async def test_rows_a_unique_index_rejects_keep_their_live_version(make_world: MakeWorld) -> None:
    rig = await loaded(make_world)
    swapped = {1: "u2@example.com", 2: "u1@example.com"}  # the lookup index is unique: each blocks the other
    manifest = await rig.snapshot(lambda r: {**r, "email": swapped.get(r["id"], r["email"]), "qty": 0})
    before = rig.rows()
    await rig.command(CommandKind.RESTORE, RebuildRequest("restore-u", RebuildKind.RESTORE, manifest.snapshot_id,
                                                          TABLE))
    report = await rig.ended("restore-u")
    assert report["state"] == "completed" and "2 rows could not be installed" in report["message"], report
    assert rig.rows()[1] == before[1] and rig.rows()[2] == before[2]
    assert [rig.rows()[i]["qty"] for i in (3, 4, 5)] == [0, 0, 0] and report["changes"] == 3
