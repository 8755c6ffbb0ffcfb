"""Fan-out snapshots in memory: taken, kept, restored (byte-identical rows), fetched, and DELTA_FROM_SNAPSHOT."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.changes import ColumnInfo
from laredo_fanout.adapters.memory import MemorySnapshotStore
from laredo_fanout.application.snapshots import SnapshotPolicy
from laredo_fanout.domain.errors import SnapshotNotFound
from services.fanout.tests.conftest import World, build_world
from services.fanout.tests.fanout_testkit import Batches, insert, row, tuple_of, update

MakeWorld = Callable[..., World]
TYPED = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("amount", 1700, "numeric"), ColumnInfo("at", 1184, "timestamptz"), ColumnInfo("blob", 17, "bytea"),
    ColumnInfo("score", 701, "float8"), ColumnInfo("doc", 3802, "jsonb"), ColumnInfo("tags", 1007, "_int4"),
    ColumnInfo("big", 20, "int8"), ColumnInfo("day", 1082, "date"), ColumnInfo("small", 1700, "numeric"),
)


def typed_row(i: int) -> dict[str, Any]:
    """Text forms as PostgreSQL sends them; several lose their Python type in JSON (Decimal, datetime, bytes)."""
    return {"id": str(i), "amount": f"{i}.50", "at": "2026-11-22 13:45:01.5+00", "blob": "\\x00ff",
            "score": "NaN" if i % 2 else "-0.25", "doc": '{"a": [1, 9007199254740993], "b": null}',
            "tags": "{1,NULL,3}", "big": "9223372036854775807", "day": "infinity" if i % 3 else "2026-01-02",
            "small": "0.0000001"}


def typed_change(i: int, action: int = spb.ACTION_INSERT) -> spb.Change:
    return spb.Change(action=action, new_tuple=tuple_of(typed_row(i), TYPED))


def started(make_world: MakeWorld, store: MemorySnapshotStore, **policy: Any) -> World:
    world = make_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0, **policy))
    world.batches = Batches(columns=TYPED)
    world.publish(world.batches.baseline([typed_row(i) for i in range(1, 6)]))
    world.start()
    return world


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
async def test_restored_state_serves_the_same_bytes_and_continues_the_stream(make_world: MakeWorld, fmt: str) -> None:
    store = MemorySnapshotStore()
    world = started(make_world, store, format=fmt)
    await eventually(lambda: world.replica.ready, what="the table ready")
    snapshots = world.targets.snapshots[world.replica.table]
    manifest = await snapshots.take()
    assert manifest is not None and (manifest.row_count, manifest.journal_sequence) == (5, 5)
    assert manifest.format == fmt and all(p.name.endswith(f".{fmt}") for p in manifest.parts)
    assert manifest.stream_sequence == 3 and manifest.source_position == str(world.replica.applied_position)
    assert await snapshots.take() is None  # nothing changed since
    world.publish(world.batches.transaction(typed_change(6), typed_change(2, spb.ACTION_UPDATE)))
    world.publish(world.batches.transaction(typed_change(7)))
    await eventually(lambda: world.replica.journal.current_sequence == 7, what="the tail applied")

    restored = build_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0), feed=world.feed)
    restored.tasks = world.tasks
    assert await restored.targets.snapshots[restored.replica.table].restore_newest() == manifest
    restored.start(start_after_sequence=manifest.stream_sequence)
    await eventually(lambda: restored.replica.journal.current_sequence == 7, what="the tail after the snapshot")
    assert [m.stream_sequence for m in restored.observer.applied] == [4, 5]  # not replayed from the start
    original = {r.key: r.encoded for r in world.replica.state.rows()}
    assert {r.key: r.encoded for r in restored.replica.state.rows()} == original
    assert [e.encoded for e in restored.replica.journal.entries_after(5, 10)] == [
        e.encoded for e in world.replica.journal.entries_after(5, 10)]
    client, _ = restored.sync()
    await eventually(lambda: client.snapshot_done, what="a full snapshot from the restored state")
    values = client.rows[3.0]
    assert (values["amount"], values["at"], values["blob"], values["big"], values["small"]) == (
        "3.50", "2026-11-22T13:45:01.500000+00:00", "AP8=", "9223372036854775807", "0.0000001")
    assert values["doc"] == {"a": [1.0, "9007199254740993"], "b": None} and values["day"] == "2026-01-02"


async def test_no_snapshot_mid_baseline_and_retention_by_count(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = started(make_world, store, keep_count=2)
    snapshots = world.targets.snapshots[world.replica.table]
    await eventually(lambda: world.replica.ready, what="the table ready")
    taken = []
    for i in range(10, 14):
        world.publish(world.batches.transaction(typed_change(i)))
        await eventually(lambda: world.replica.journal.current_sequence == i - 4, what="the change")
        world.clock.advance(1)
        taken.append(await snapshots.take())
    assert [m.snapshot_id for m in await store.list_snapshots(world.replica.table)] == [
        m.snapshot_id for m in reversed(taken[-2:]) if m]
    world.publish(world.batches.baseline([typed_row(1)])[:2])  # BEGIN and the rows, no END yet
    await eventually(lambda: world.replica.state.baseline_in_progress, what="a baseline in progress")
    assert await snapshots.take() is None


async def test_delta_from_a_retained_snapshot_and_fetch(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = make_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0))
    world.publish(world.batches.baseline([row(i) for i in range(1, 4)]))
    world.start()
    await eventually(lambda: world.replica.ready, what="the table ready")
    snapshots = world.targets.snapshots[world.replica.table]
    manifest = await snapshots.take()
    assert manifest is not None
    world.publish(world.batches.transaction(update(row(1, "one")), insert(row(4))))

    fetched = [rpb.FetchSnapshotResponse.FromString(m) async for m in world.targets.snapshot_messages(
        *await world.targets.find_snapshot(manifest.snapshot_id))]
    assert [f.WhichOneof("chunk") for f in fetched] == ["begin", "row", "row", "row", "end"]
    assert (fetched[0].begin.sequence, fetched[0].begin.row_count, fetched[-1].end.rows_sent) == (3, 3, 3)
    assert MessageToDict(fetched[1].row.row) == {"id": 1.0, "name": "n1", "doc": "d"}
    with pytest.raises(SnapshotNotFound):
        await world.targets.find_snapshot("nope")

    await eventually(lambda: world.replica.journal.current_sequence == 5, what="two more entries")
    client, _ = world.sync(last_snapshot_id=manifest.snapshot_id)
    await eventually(lambda: client.sequences == [4, 5], what="the entries after the snapshot")
    assert client.handshake is not None and client.handshake.mode == rpb.SYNC_MODE_DELTA_FROM_SNAPSHOT
    assert (client.handshake.snapshot_id, client.handshake.resume_from_sequence) == (manifest.snapshot_id, 3)
    unknown, _ = world.sync(last_snapshot_id="unknown")
    await eventually(lambda: unknown.snapshot_done, what="a full snapshot for an unknown id")


async def test_a_damaged_newest_snapshot_falls_back_to_an_older_one(make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = started(make_world, store)
    snapshots = world.targets.snapshots[world.replica.table]
    await eventually(lambda: world.replica.ready, what="the table ready")
    older = await snapshots.take()
    world.publish(world.batches.transaction(typed_change(9)))
    await eventually(lambda: world.replica.journal.current_sequence == 6, what="one more change")
    world.clock.advance(1)
    newer = await snapshots.take()
    assert older is not None and newer is not None
    store._parts[(world.replica.table, newer.snapshot_id)]["rows-00000.jsonl"] += b"{}\n"  # noqa: SLF001
    fresh = build_world(snapshot_store=store, snapshot_policy=SnapshotPolicy(interval=0))
    assert await fresh.targets.snapshots[fresh.replica.table].restore_newest() == older
    assert len(fresh.replica.state) == 5 and fresh.replica.journal.current_sequence == 5


async def test_a_snapshot_deleted_from_the_store_is_neither_fetched_nor_counted_as_the_latest(
        make_world: MakeWorld) -> None:
    store = MemorySnapshotStore()
    world = started(make_world, store)
    await eventually(lambda: world.replica.ready, what="the table ready")
    snapshots = world.targets.snapshots[world.replica.table]
    deleted = await snapshots.take()
    assert deleted is not None and await snapshots.take() is None  # unchanged since: the timer skips it
    await store.delete_snapshot(world.replica.table, deleted.snapshot_id)  # as OAM's DeleteSnapshot does

    with pytest.raises(SnapshotNotFound):
        await world.targets.find_snapshot(deleted.snapshot_id)
    world.clock.advance(1)
    again = await snapshots.take()  # the table did not change, but its only snapshot is gone
    assert again is not None and again.snapshot_id != deleted.snapshot_id
    assert again.source_position == deleted.source_position
    assert world.targets.status("public", "items").latest_snapshot == again
    assert [m.snapshot_id for m in await store.list_snapshots(world.replica.table)] == [again.snapshot_id]
    assert await snapshots.take() is None  # and that one stands for the unchanged table again

    await store.delete_snapshot(world.replica.table, again.snapshot_id)
    assert await snapshots.list() == [] and world.targets.status("public", "items").latest_snapshot is None
