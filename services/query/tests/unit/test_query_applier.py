"""The ChangeApplier on the in-memory feed: positions, baselines, readiness and subscriber events."""

from __future__ import annotations

from collections.abc import Callable

from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.tuples import UNCHANGED
from laredo_query.domain.indexes import IndexDefinition
from laredo_testing.eventually import eventually
from services.query.tests.query_testkit import row, truncate
from services.query.tests.unit.conftest import World


def values(world: World) -> dict[int, dict]:
    return {r.key: r.values for r in world.table.indexed.rows()}


async def test_baseline_then_changes_make_the_table_ready_and_replays_change_nothing(
        make_world: Callable[..., World]) -> None:
    world = make_world()
    b = world.batches
    log = [b.baseline([row(i) for i in range(1, 6)], chunk_rows=2),
           b.transaction(b.update(row(1, status="paid")), b.delete({"id": 2}), b.insert(row(9)))]
    changed = world.signal.changed()
    world.publish(*log)
    world.start()
    await eventually(lambda: world.table.ready, what="the table to be ready")
    assert changed.is_set(), "readiness changes wake whoever mirrors them"
    expected = {1: row(1, status="paid"), 3: row(3), 4: row(4), 5: row(5), 9: row(9)}
    assert values(world) == expected
    position = world.table.applied_position
    world.publish(*log)  # the same messages again: a replay after an ingest restart
    world.publish(b.transaction(b.insert(row(10))))
    await eventually(lambda: 10 in values(world), what="the change after the replay")
    assert values(world) == {**expected, 10: row(10)} and world.table.applied_position > position
    assert world.table.status()["position_regressions"] == 4, "three baseline chunks and the transaction, counted"
    applied = world.table.status()["applied"]  # what OAM shows per pipeline: transactions' changes, not replays
    assert (applied["inserts"], applied["updates"], applied["deletes"], applied["truncates"]) == (2, 1, 1, 0)
    assert applied["last_change_unix_ms"] > 0


async def test_subscribers_get_one_event_per_effective_change_with_positions(make_world: Callable[..., World]) -> None:
    world = make_world()
    b = world.batches
    world.publish(b.baseline([row(1), row(2)]))
    world.start()
    await eventually(lambda: world.table.ready, what="ready")
    subscription = world.table.subscribers.open()
    world.publish(b.transaction(b.update(row(1, status="x")), b.update(row(1, status="x")), b.delete({"id": 2}),
                                b.update({**row(3), "doc": UNCHANGED})),
                  b.transaction(truncate()))
    await eventually(lambda: len(subscription) == 4, what="four events")
    events = [await subscription.next() for _ in range(4)]
    assert [e.action.value for e in events] == ["UPDATE", "DELETE", "INSERT", "TRUNCATE"]
    update, delete, upsert, trunc = events
    assert update.old.values["status"] == "new" and update.new.values["status"] == "x"
    assert update.xid == b.xid - 1 and update.commit_time_unix_us == 1_700_000_000_000_000
    assert delete.old.values == row(2) and delete.new is None, "a key-only delete reports the whole old row"
    assert upsert.old is None and "doc" not in upsert.new.values, "an update of an unknown row inserts it"
    assert trunc.old is None and trunc.new is None
    positions = [e.position for e in events]
    assert positions == sorted(positions)


async def test_a_re_baseline_deletes_rows_it_lacks_and_tells_subscribers(make_world: Callable[..., World]) -> None:
    world = make_world()
    b = world.batches
    world.publish(b.baseline([row(i) for i in range(1, 4)]))
    world.start()
    await eventually(lambda: world.table.ready, what="ready")
    subscription = world.table.subscribers.open()
    world.publish(b.baseline([row(1), row(3, status="changed")]))
    await eventually(lambda: world.table.baselines_completed == 2, what="the second baseline")
    assert sorted(values(world)) == [1, 3]
    events = [await subscription.next() for _ in range(len(subscription))]
    assert [(e.action.value, (e.new or e.old).key) for e in events] == [("UPDATE", 3), ("DELETE", 2)]
    assert world.service.lookup("public", "items", "by_status", ["changed"]).key == 3


async def test_resync_required_makes_the_table_unready_until_the_next_baseline(
        make_world: Callable[..., World]) -> None:
    world = make_world()
    b = world.batches
    world.publish(b.baseline([row(1)]))
    world.start()
    await eventually(lambda: world.table.ready, what="ready")
    world.publish(b.control(spb.BATCH_KIND_RESYNC_REQUIRED, "slot invalidated"))
    await eventually(lambda: not world.table.ready, what="unready after the loss of continuity")
    assert "slot invalidated" in world.table.status()["stale"]
    assert world.service.count_rows("public", "items") == 1, "still answering meanwhile"
    world.publish(b.baseline([row(1), row(2)]))
    await eventually(lambda: world.table.ready, what="ready again after the new baseline")


async def test_an_index_on_a_missing_column_keeps_the_table_unready_and_says_why(
        make_world: Callable[..., World]) -> None:
    world = make_world(definitions=(IndexDefinition("by_colour", ("colour",), False),))
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    await eventually(lambda: world.table.loaded, what="loaded")
    ready, details = world.service.readiness()
    assert not ready and "colour" in details["tables"]["public.items"]["problems"][0]
    assert world.service.get_row("public", "items", 1, []).key == 1, "the primary key still works"


async def test_a_change_without_its_key_is_skipped_and_counted(make_world: Callable[..., World]) -> None:
    world = make_world()
    b = world.batches
    world.publish(b.baseline([row(1)]),
                  b.transaction(b.update({**row(1, status="lost"), "id": UNCHANGED})),  # a TOASTed key
                  b.transaction(b.insert(row(2))))
    world.start()
    await eventually(lambda: world.table.ready, what="ready")
    assert world.table.skipped_changes == 1 and world.table.status()["skipped_changes"] == 1
    assert sorted(values(world)) == [1, 2] and values(world)[1]["status"] == "new"
