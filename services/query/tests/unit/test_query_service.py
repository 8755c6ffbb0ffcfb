"""The query use cases on the in-memory world: routing, validation, lookups, pages and subscriptions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_query.domain.errors import (
    IndexNotFound,
    InvalidKey,
    InvalidPageToken,
    InvalidRequest,
    TableNotFound,
    TableNotReady,
)
from laredo_query.domain.indexes import IndexDefinition
from laredo_testing.eventually import eventually
from services.query.tests.query_testkit import Batches, row
from services.query.tests.unit.conftest import World

ACCOUNTS = TableId("public", "accounts")
ACCOUNT_COLUMNS = (ColumnInfo("region", 25, "text", not_null=True, primary_key_ordinal=1),
                   ColumnInfo("code", 25, "text", not_null=True, primary_key_ordinal=2),
                   ColumnInfo("name", 25, "text"))


async def loaded(make_world: Callable[..., World], rows: int = 10, **options: object) -> World:
    world = make_world(**options)
    world.publish(world.batches.baseline([row(i, status="odd" if i % 2 else "even") for i in range(1, rows + 1)]))
    world.start()
    await eventually(lambda: world.table.ready, what="the table to be ready")
    return world


async def test_requests_are_routed_and_validated(make_world: Callable[..., World]) -> None:
    world = await loaded(make_world)
    service = world.service
    with pytest.raises(InvalidRequest, match="schema and table required"):
        service.count_rows("", "")
    with pytest.raises(InvalidRequest, match="table required"):
        service.count_rows("public", "")
    with pytest.raises(TableNotFound, match=r"no indexed-memory target for public.nope .*tables served: public.items"):
        service.count_rows("public", "nope")
    with pytest.raises(InvalidRequest, match="index_name is required for LookupAll.*primary, lookup, by_status"):
        service.lookup_all("public", "items", "", ["x"])
    with pytest.raises(IndexNotFound):
        service.lookup("public", "items", "by_nothing", ["x"])


async def test_queries_wait_for_the_first_baseline_but_subscriptions_do_not(make_world: Callable[..., World]) -> None:
    world = make_world()
    world.start()
    with pytest.raises(TableNotReady, match="public.items is not loaded yet .*baseline in progress, 0 rows"):
        world.service.lookup("public", "items", "", ["x"])
    stream = world.service.subscribe("public", "items", True)
    assert stream.replay == []
    world.publish(world.batches.baseline([row(1)]))
    await eventually(lambda: world.service.count_rows("public", "items") == 1, what="served after the baseline")
    assert (await stream.subscription.next()).new.key == 1
    stream.close()


async def test_lookup_uses_lookup_fields_or_else_the_primary_key(make_world: Callable[..., World]) -> None:
    world = await loaded(make_world)
    assert world.service.lookup("public", "items", "", ["u4@example.com"]).key == 4
    assert world.service.lookup("public", "items", "", ["nobody@example.com"]) is None
    assert world.service.lookup("public", "items", "by_status", ["odd"]).key == 1, "the match indexed first"
    assert [r.key for r in world.service.lookup_all("public", "items", "by_status", ["even"])] == [2, 4, 6, 8, 10]
    assert [r.key for r in world.service.lookup_all("public", "items", "lookup", ["u3@example.com"])] == [3]
    plain = await loaded(make_world, definitions=(IndexDefinition("by_status", ("status",), False),))
    assert plain.service.lookup("public", "items", "", [7.0]).key == 7


async def test_get_row_by_integer_or_by_values(make_world: Callable[..., World]) -> None:
    world = await loaded(make_world)
    assert world.service.get_row("public", "items", 3, []).key == 3
    assert world.service.get_row("public", "items", 0, [5.0]).key == 5
    assert world.service.get_row("public", "items", 0, ["6"]).key == 6
    assert world.service.get_row("public", "items", 99, []) is None
    with pytest.raises(InvalidKey, match="not a whole number"):
        world.service.get_row("public", "items", 0, [1.5])


async def test_get_row_on_composite_and_text_keys_needs_values(make_world: Callable[..., World]) -> None:
    world = make_world(table=ACCOUNTS, definitions=())
    world.batches = Batches(table=ACCOUNTS, columns=ACCOUNT_COLUMNS)
    world.publish(world.batches.baseline([{"region": "eu", "code": "a1", "name": "Ann"},
                                          {"region": "us", "code": "a1", "name": "Bob"}]))
    world.start()
    await eventually(lambda: world.table.ready, what="ready")
    assert world.service.get_row("public", "accounts", 0, ["us", "a1"]).values["name"] == "Bob"
    with pytest.raises(InvalidRequest, match=r"composite primary key \(region, code\): send primary_key_values"):
        world.service.get_row("public", "accounts", 1, [])
    page = world.service.list_rows("public", "accounts", 1, "")
    assert page.rows[0].key == ("eu", "a1") and page.next_page_token
    second = world.service.list_rows("public", "accounts", 1, page.next_page_token)
    assert second.rows[0].key == ("us", "a1") and second.next_page_token == ""


async def test_list_rows_pages_in_key_order_with_total_count(make_world: Callable[..., World]) -> None:
    world = await loaded(make_world, rows=25)
    first = world.service.list_rows("public", "items", 10, "")
    assert [r.key for r in first.rows] == list(range(1, 11)) and first.total_count == 25
    b = world.batches
    world.publish(b.transaction(b.delete({"id": 10}), b.delete({"id": 11}), b.insert(row(30))))
    await eventually(lambda: world.service.count_rows("public", "items") == 24, what="the changes")
    second = world.service.list_rows("public", "items", 10, first.next_page_token)
    assert [r.key for r in second.rows] == list(range(12, 22)) and second.total_count == 24
    third = world.service.list_rows("public", "items", 10, second.next_page_token)
    assert [r.key for r in third.rows] == [22, 23, 24, 25, 30] and third.next_page_token == ""
    everything = world.service.list_rows("public", "items", 0, "")
    assert [r.key for r in everything.rows] == [*range(1, 10), *range(12, 26), 30]
    with pytest.raises(InvalidPageToken, match="not one this service issued"):
        world.service.list_rows("public", "items", 10, "page-2")


async def test_subscribe_replays_a_copy_taken_when_the_listener_was_registered(
        make_world: Callable[..., World]) -> None:
    world = await loaded(make_world, rows=3)
    stream = world.service.subscribe("public", "items", replay_existing=True)
    b = world.batches
    world.publish(b.transaction(b.update(row(1, status="later")), b.insert(row(4))))
    await eventually(lambda: len(stream.subscription) == 2, what="the live events")
    assert sorted(r.key for r in stream.replay) == [1, 2, 3]
    assert next(r for r in stream.replay if r.key == 1).values["status"] == "odd", "the copy is not affected"
    live = [await stream.subscription.next() for _ in range(2)]
    assert [(e.action.value, e.new.key) for e in live] == [("UPDATE", 1), ("INSERT", 4)]
    stream.close()
    assert len(world.table.subscribers) == 0
