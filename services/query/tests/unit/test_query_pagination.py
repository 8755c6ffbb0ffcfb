"""Keyset pages: tokens stay valid while rows change; every row present throughout appears exactly once."""

from __future__ import annotations

import random

import pytest

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position
from laredo_query.domain.errors import InvalidPageToken, InvalidRequest
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.domain.keys import KeyKind, KeySpec
from laredo_query.domain.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, decode_token, encode_token, page_size
from services.query.tests.query_testkit import COLUMNS, row

SPEC = KeySpec(["id"], [KeyKind.INTEGER])


def change(action: Action, i: int, ordinal: int) -> RowChange:
    values = row(i)
    if action is Action.DELETE:
        return RowChange(Position(1, ordinal), action, {"id": i}, None, True)
    return RowChange(Position(1, ordinal), action, None, values)


def list_all(table: IndexedTable, size: int, between_pages=lambda page: None) -> list[int]:  # noqa: ANN001
    seen: list[int] = []
    token = ""
    while True:
        cursor = decode_token(token, "public.items", table.key_spec)
        rows, more = table.page(cursor.key, size, start=cursor.start)
        seen.extend(r.values["id"] for r in rows)
        if not more:
            return seen
        token = encode_token("public.items", table.key_spec, rows[-1].key)
        between_pages(len(seen))


def test_pages_cover_every_row_once_while_rows_are_inserted_and_deleted() -> None:
    rnd = random.Random(3)
    table = IndexedTable("public.items")
    table.set_columns(COLUMNS, ("id",))
    for i in range(0, 1000, 2):
        table.apply(change(Action.INSERT, i, i))
    stable = set(range(0, 1000, 2))
    ordinal = [10_000]

    def churn(_: int) -> None:
        for _ in range(20):
            ordinal[0] += 1
            i = rnd.randrange(1000)
            if table.get(i) is None:
                table.apply(change(Action.INSERT, i, ordinal[0]))
            else:
                table.apply(change(Action.DELETE, i, ordinal[0]))
                stable.discard(i)

    seen = list_all(table, 37, churn)
    assert seen == sorted(seen) and len(seen) == len(set(seen)), "in key order, no row twice"
    assert stable <= set(seen), "every row present for the whole listing was returned"


def test_a_token_stays_valid_when_the_row_it_names_is_deleted() -> None:
    table = IndexedTable("public.items")
    table.set_columns(COLUMNS, ("id",))
    for i in range(1, 11):
        table.apply(change(Action.INSERT, i, i))
    rows, more = table.page(None, 3, start=True)
    token = encode_token("public.items", table.key_spec, rows[-1].key)
    table.apply(change(Action.DELETE, 3, 100))
    table.apply(change(Action.DELETE, 4, 101))
    cursor = decode_token(token, "public.items", table.key_spec)
    assert [r.values["id"] for r in table.page(cursor.key, 3, start=cursor.start)[0]] == [5, 6, 7]


def test_page_sizes_default_cap_and_reject_negatives() -> None:
    assert page_size(0) == DEFAULT_PAGE_SIZE and page_size(5) == 5 and page_size(10**6) == MAX_PAGE_SIZE
    with pytest.raises(InvalidRequest, match="page_size must not be negative"):
        page_size(-1)


@pytest.mark.parametrize(("token", "message"), [
    ("garbage", "not one this service issued"),
    ("v1.@@@@", "not base64url JSON"),
    ("v1." + "e30", "malformed"),  # {}
])
def test_malformed_tokens_are_rejected_naming_the_problem(token: str, message: str) -> None:
    with pytest.raises(InvalidPageToken, match=message):
        decode_token(token, "public.items", SPEC)


def test_tokens_of_another_table_or_key_are_rejected() -> None:
    token = encode_token("public.other", SPEC, 5)
    with pytest.raises(InvalidPageToken, match="belongs to a listing of public.other, not public.items"):
        decode_token(token, "public.items", SPEC)
    token = encode_token("public.items", SPEC, 5)
    with pytest.raises(InvalidPageToken, match=r"issued for primary key \(id\) of public.items, whose key is now"):
        decode_token(token, "public.items", KeySpec(["id", "region"], [KeyKind.INTEGER, KeyKind.TEXT]))
    with pytest.raises(InvalidPageToken, match="does not fit the columns"):
        decode_token(encode_token("public.items", KeySpec(["id"], [KeyKind.TEXT]), "x"), "public.items", SPEC)


def test_composite_and_text_keys_round_trip_through_tokens() -> None:
    spec = KeySpec(["region", "code"], [KeyKind.TEXT, KeyKind.NUMERIC])
    from decimal import Decimal
    cursor = decode_token(encode_token("public.t", spec, ("eu/ü", Decimal("1.50"))), "public.t", spec)
    assert cursor.key == ("eu/ü", Decimal("1.5")) and not cursor.start
