"""Subscription filters: predicate matching as a table, routing of entries, and filtered Sync sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.changes import Action
from laredo_fanout.domain.errors import InvalidSyncRequest
from laredo_fanout.domain.subscription_filter import EntryRoute, FieldPredicate, MatchKind, SubscriptionFilter
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import as_client_rows, delete, insert, row, truncate, update

EQ, PREFIX, IN = MatchKind.EQUALS, MatchKind.PREFIX, MatchKind.IN


class Case(NamedTuple):
    name: str
    predicates: list[FieldPredicate]
    values: dict[str, Any] | None
    matches: bool


CASES = [
    Case("equals string", [FieldPredicate("t", EQ, "a")], {"t": "a"}, True),
    Case("equals string differs", [FieldPredicate("t", EQ, "a")], {"t": "b"}, False),
    Case("int equals double", [FieldPredicate("n", EQ, 5.0)], {"n": 5}, True),
    Case("numeric string equals double", [FieldPredicate("amount", EQ, 12.5)], {"amount": "12.50"}, True),
    Case("numeric string in a text column is text", [FieldPredicate("t", EQ, 12)], {"t": "12"}, False),
    Case("bool never equals a number", [FieldPredicate("n", EQ, 1)], {"n": True}, False),
    Case("bool equals bool", [FieldPredicate("b", EQ, False)], {"b": False}, True),
    Case("missing field never matches", [FieldPredicate("t", EQ, "a")], {"x": "a"}, False),
    Case("null never matches", [FieldPredicate("t", EQ, None)], {"t": None}, False),
    Case("prefix", [FieldPredicate("t", PREFIX, "ten")], {"t": "tenant-1"}, True),
    Case("prefix on a number never matches", [FieldPredicate("n", PREFIX, "1")], {"n": 12}, False),
    Case("in", [FieldPredicate("t", IN, ("a", "b"))], {"t": "b"}, True),
    Case("in with numbers", [FieldPredicate("n", IN, (1.0, 2.0))], {"n": 2}, True),
    Case("in misses", [FieldPredicate("t", IN, ("a",))], {"t": "c"}, False),
    Case("predicates are AND-ed", [FieldPredicate("t", EQ, "a"), FieldPredicate("n", EQ, 1)], {"t": "a", "n": 2},
         False),
    Case("both hold", [FieldPredicate("t", EQ, "a"), FieldPredicate("n", IN, (1, 2))], {"t": "a", "n": 2}, True),
    Case("no row", [FieldPredicate("t", EQ, "a")], None, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches(case: Case) -> None:
    assert SubscriptionFilter(case.predicates, numeric_columns=("n", "amount")).matches(case.values) is case.matches


ROUTES = [
    (Action.INSERT, None, {"t": "a"}, EntryRoute.SEND),
    (Action.INSERT, None, {"t": "b"}, EntryRoute.SKIP),
    (Action.DELETE, {"t": "a"}, None, EntryRoute.SEND),  # old = the full stored row, not the key alone
    (Action.DELETE, {"t": "b"}, None, EntryRoute.SKIP),
    (Action.UPDATE, {"t": "a"}, {"t": "a"}, EntryRoute.SEND),
    (Action.UPDATE, {"t": "a"}, {"t": "b"}, EntryRoute.AS_DELETE),  # moved out of the partition
    (Action.UPDATE, {"t": "b"}, {"t": "a"}, EntryRoute.AS_INSERT),  # moved in
    (Action.UPDATE, None, {"t": "a"}, EntryRoute.AS_INSERT),
    (Action.UPDATE, {"t": "b"}, {"t": "c"}, EntryRoute.SKIP),
    (Action.TRUNCATE, None, None, EntryRoute.SEND),
]


@pytest.mark.parametrize(("action", "old", "new", "route"), ROUTES)
def test_route(action: Action, old: dict[str, Any] | None, new: dict[str, Any] | None, route: EntryRoute) -> None:
    assert SubscriptionFilter([FieldPredicate("t", EQ, "a")]).route(action, old, new) is route


@pytest.mark.parametrize(("predicate", "message"), [
    (FieldPredicate("", EQ, 1), "without a field"),
    (FieldPredicate("t", None), "sets none of equals, prefix, in"),
    (FieldPredicate("t", PREFIX, 5), "must be a string"),
])
def test_invalid_predicates(predicate: FieldPredicate, message: str) -> None:
    with pytest.raises(InvalidSyncRequest, match=message):
        SubscriptionFilter([predicate])


async def test_filtered_client_sees_its_partition_and_rows_leaving_it(make_world: Callable[..., World]) -> None:
    """Snapshot, catch-up and live are filtered; a row moving out arrives as a DELETE, moving in as an INSERT."""
    world = make_world()
    rows = [row(i, name="keep" if i % 2 else "other") for i in range(1, 7)]
    world.publish(world.batches.baseline(rows))
    world.start()
    await eventually(lambda: world.replica.ready, what="the table ready")
    world.publish(world.batches.transaction(update(row(2, "keep"))))  # 2 joins before the client connects
    await eventually(lambda: world.replica.journal.current_sequence == 7, what="the catch-up entry")
    client, _ = world.sync(last_known_sequence=6, client_id="keeper", **world.issued_here(),
                           filters=(FieldPredicate("name", EQ, "keep"),))
    await eventually(lambda: client.handshake is not None and 2 in client.rows, what="2 from the catch-up")
    assert client.handshake.mode == rpb.SYNC_MODE_DELTA

    fresh, _ = world.sync(filters=(FieldPredicate("name", IN, ("keep",)),))
    await eventually(lambda: fresh.snapshot_done, what="the filtered snapshot")
    assert set(fresh.rows) == {1.0, 2.0, 3.0, 5.0} and fresh.snapshot_rows == 4

    world.publish(world.batches.transaction(update(row(1, "other")), insert(row(8, "keep")), insert(row(9, "x")),
                                            delete({"id": 3})))
    await eventually(lambda: world.replica.journal.current_sequence == 11, what="the four changes applied")
    values = [world.replica.state.values_of(s) for s in world.replica.state.rows()]
    partition = as_client_rows([dict(v) for v in values if v["name"] == "keep"])
    await eventually(lambda: fresh.rows == partition, what="the filtered replica to equal the partition")
    await eventually(lambda: set(client.rows) == {2.0, 8.0}, what="the delta client's rows (it had no state)")
    entries = [m.journal_entry for m in fresh.messages if m.WhichOneof("message") == "journal_entry"]
    assert [(e.action, e.HasField("old_values"), e.HasField("new_values")) for e in entries] == [
        ("DELETE", True, False), ("INSERT", False, True), ("DELETE", True, False)]
    assert [e.sequence for e in entries] == [8, 9, 11]

    world.publish(world.batches.transaction(truncate()))
    await eventually(lambda: fresh.rows == {}, what="TRUNCATE passes every filter")


async def test_filters_on_unknown_columns_are_rejected(make_world: Callable[..., World]) -> None:
    world = make_world()
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    await eventually(lambda: world.replica.columns != (), what="the columns known")
    with pytest.raises(InvalidSyncRequest, match="'nope': not a column of public.items"):
        world.sync(filters=(FieldPredicate("nope", EQ, 1),))
