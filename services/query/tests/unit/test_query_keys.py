"""Canonical keys: column kinds, request coercion (the documented matching rule), token round trips."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from laredo_kernel.changes import ColumnInfo
from laredo_query.domain.errors import InvalidKey
from laredo_query.domain.keys import KeyKind, KeySpec, coerce, kind_of


@pytest.mark.parametrize(("column", "kind"), [
    (ColumnInfo("a", 20, "int8"), KeyKind.INTEGER),
    (ColumnInfo("a", 21, "int2"), KeyKind.INTEGER),
    (ColumnInfo("a", 701, "float8"), KeyKind.FLOAT),
    (ColumnInfo("a", 1700, "numeric"), KeyKind.NUMERIC),
    (ColumnInfo("a", 16, "bool"), KeyKind.BOOL),
    (ColumnInfo("a", 25, "text"), KeyKind.TEXT),
    (ColumnInfo("a", 2950, "uuid"), KeyKind.TEXT),
    (ColumnInfo("a", 1184, "timestamptz"), KeyKind.TEXT),
    (ColumnInfo("a", 3802, "jsonb"), KeyKind.DOCUMENT),
    (ColumnInfo("a", 1007, "_int4"), KeyKind.DOCUMENT),
    (ColumnInfo("a", 99001, "_my_enum", base_type_oid=99000), KeyKind.DOCUMENT),
    (ColumnInfo("a", 99002, "my_domain", base_type_oid=23), KeyKind.INTEGER),
    (ColumnInfo("a", 99003, "my_enum"), KeyKind.TEXT),
])
def test_kind_of_follows_the_type(column: ColumnInfo, kind: KeyKind) -> None:
    assert kind_of(column) is kind


@pytest.mark.parametrize(("kind", "value", "expected"), [
    (KeyKind.INTEGER, 5.0, 5),
    (KeyKind.INTEGER, 5, 5),
    (KeyKind.INTEGER, "9007199254740993", 9007199254740993),
    (KeyKind.INTEGER, " -12 ", -12),
    (KeyKind.FLOAT, 2, 2.0),
    (KeyKind.FLOAT, "1.5", 1.5),
    (KeyKind.NUMERIC, 0.1, Decimal("0.1")),
    (KeyKind.NUMERIC, "1.50", Decimal("1.5")),
    (KeyKind.BOOL, True, True),
    (KeyKind.BOOL, "false", False),
    (KeyKind.TEXT, "x", "x"),
    (KeyKind.DOCUMENT, {"b": [1, 2], "a": None}, (("a", None), ("b", (1, 2)))),
    (KeyKind.TEXT, None, None),
])
def test_request_values_are_coerced_to_the_column_kind(kind: KeyKind, value: Any, expected: Any) -> None:
    coerced = coerce(kind, value)
    assert coerced == expected and hash(coerced) == hash(expected)


@pytest.mark.parametrize(("kind", "value", "message"), [
    (KeyKind.INTEGER, 5.5, "not a whole number"),
    (KeyKind.INTEGER, "abc", "string of digits"),
    (KeyKind.INTEGER, True, "not a boolean"),
    (KeyKind.TEXT, 5.0, "send a string"),
    (KeyKind.BOOL, 1.0, "true or false"),
    (KeyKind.NUMERIC, "1,5", "decimal string"),
])
def test_values_that_cannot_match_are_rejected_with_a_reason(kind: KeyKind, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        coerce(kind, value)


def test_a_double_matches_an_integer_key_and_a_decimal_matches_by_value() -> None:
    spec = KeySpec(["id"], [KeyKind.INTEGER])
    stored = {spec.of_row({"id": 5}): "row"}
    assert stored[spec.from_request([5.0], "pk")] == "row"
    numeric = KeySpec(["price"], [KeyKind.NUMERIC])
    assert numeric.of_row({"price": "1.50"}) == numeric.from_request([1.5], "price")  # rows hold numeric text
    assert numeric.of_row({"price": "1.50"}) == Decimal("1.5")


def test_text_kind_keys_of_non_string_values_use_their_json_form() -> None:
    spec = KeySpec(["at"], [KeyKind.TEXT])
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert spec.of_row({"at": stamp}) == spec.from_request(["2026-01-02T03:04:05+00:00"], "at")


def test_composite_keys_are_tuples_and_need_one_value_per_column() -> None:
    spec = KeySpec(["region", "code"], [KeyKind.TEXT, KeyKind.INTEGER])
    assert spec.of_row({"region": "eu", "code": 7, "x": 1}) == ("eu", 7)
    assert spec.from_request(["eu", 7.0], "pk") == ("eu", 7)
    with pytest.raises(InvalidKey, match=r"pk has 2 column\(s\) \(region, code\); got 1 key value"):
        spec.from_request(["eu"], "pk")
    with pytest.raises(InvalidKey, match="value 'x' for integer column 'code'"):
        spec.from_request(["eu", "x"], "pk")


@pytest.mark.parametrize(("kinds", "key"), [
    ([KeyKind.INTEGER], 2**70),
    ([KeyKind.NUMERIC], Decimal("-1.25")),
    ([KeyKind.FLOAT], float("inf")),
    ([KeyKind.TEXT, KeyKind.BOOL], ("é", False)),
    ([KeyKind.DOCUMENT], (("a", (1, 2)),)),
    ([KeyKind.TEXT, KeyKind.INTEGER], (None, 3)),
])
def test_keys_round_trip_through_json(kinds: list[KeyKind], key: Any) -> None:
    spec = KeySpec([f"c{i}" for i in range(len(kinds))], kinds)
    assert spec.from_json(spec.to_json(key)) == key


def test_from_json_rejects_keys_of_the_wrong_shape() -> None:
    spec = KeySpec(["id"], [KeyKind.INTEGER])
    for bad in ([1, 2], ["1"], "1", [1.5]):
        with pytest.raises(ValueError):
            spec.from_json(bad)
