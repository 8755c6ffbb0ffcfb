"""Struct and Value bytes decoded by hand (laredo_kernel.sync_wire, RowDecoder) agree with protobuf's own parser."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from google.protobuf import struct_pb2

from laredo_client.values import Column, RowDecoder, shared_row_decoder
from laredo_kernel.sync_wire import NotCanonical, WireError
from laredo_kernel.struct_wire import StructDecoder, decode_value, is_integer_text


def reference(struct: struct_pb2.Struct) -> dict[str, Any]:
    """What the generated code says the Struct holds, read through the message API."""
    return {name: _plain(value) for name, value in struct.fields.items()}


def _plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return reference(value.struct_value)
    if kind == "list_value":
        return [_plain(v) for v in value.list_value.values]
    return None if kind in (None, "null_value") else getattr(value, kind)


def encoded(values: dict[str, Any]) -> bytes:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct.SerializeToString()


def decoded(data: bytes, integers: frozenset[str] = frozenset()) -> dict[str, Any]:
    return StructDecoder(integers).decode(data, 0, len(data))


def through_protobuf(data: bytes) -> dict[str, Any]:
    return reference(struct_pb2.Struct.FromString(data))


EVERY_KIND = {
    "null": None, "zero": 0, "int": 42, "negative": -7.25, "big": 2.0**60, "tiny": 5e-324, "inf": math.inf,
    "empty": "", "text": "plain", "unicode": "größe ✓ 漢字 🚀", "long": "x" * 300, "longer": "y" * 20_000,
    "true": True, "false": False,
    "struct": {"a": 1, "b": {"c": [1, "two", None, True, {"d": []}]}}, "empty_struct": {},
    "list": [1, 2.5, "3", None, False, [], {}], "empty_list": [], "nested_list": [[[]], [[1]]],
    "": "empty key", "ключ": "unicode key", "k" * 200: "long key",
}


@pytest.mark.parametrize("name", sorted(EVERY_KIND))
def test_every_value_kind_decodes_as_protobuf_reads_it(name: str) -> None:
    data = encoded({name: EVERY_KIND[name]})
    assert decoded(data) == through_protobuf(data)


def test_a_row_of_every_kind_at_once_and_twice_through_the_same_decoder() -> None:
    data = encoded(EVERY_KIND)
    decoder = StructDecoder()
    first, second = decoder.decode(data, 0, len(data)), decoder.decode(data, 0, len(data))  # cached headers
    assert first == second == through_protobuf(data)
    assert first["longer"] == "y" * 20_000 and first["unicode"] == "größe ✓ 漢字 🚀"


def test_plain_rows_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def general(*_: Any) -> int:
        raise AssertionError("took the general path")

    rows = [{"id": i, "name": f"row {i}" * (i % 7), "ok": i % 2 == 0, "price": i / 3, "note": None}
            for i in range(50)]
    decoder = StructDecoder(frozenset({"id"}))
    monkeypatch.setattr(StructDecoder, "_entry", general)
    for row in rows:
        data = encoded(row)
        assert decoder.decode(data, 0, len(data)) == {**through_protobuf(data), "id": row["id"]}


def test_an_empty_struct_and_a_struct_inside_a_larger_buffer() -> None:
    assert decoded(b"") == {}
    data = encoded({"id": 5, "name": "n5"})
    framed = b"\xff\xfe" + data + b"\x01\x02"
    assert StructDecoder().decode(framed, 2, 2 + len(data)) == {"id": 5.0, "name": "n5"}


def test_not_a_number_stays_not_a_number() -> None:
    assert math.isnan(decoded(encoded({"x": math.nan}))["x"])


@pytest.mark.parametrize(("text", "expected"), [("12", True), ("-12", True), ("١٢", True), ("", False), ("-", False),
                                               ("--5", False), ("²", False), ("1.0", False), (" 1", False)])
def test_integer_text_is_what_int_reads_back(text: str, expected: bool) -> None:
    assert is_integer_text(text) is expected
    if expected:
        int(text)


def test_integer_columns_become_int_where_they_hold_whole_numbers() -> None:
    data = encoded({"id": 7, "big": "123456789012345678901", "neg": "-12", "ratio": 1.5, "word": "12a",
                    "plain": 3, "nested": [1, [str(2**53 + 1), None]], "floats": [1]})
    row = decoded(data, frozenset({"id", "big", "neg", "ratio", "word", "nested"}))
    assert row == {"id": 7, "big": 123456789012345678901, "neg": -12, "ratio": 1.5, "word": "12a", "plain": 3.0,
                   "nested": [1, [2**53 + 1, None]], "floats": [1.0]}  # integer arrays: their elements too
    assert type(row["id"]) is int and type(row["plain"]) is float and type(row["nested"][0]) is int


def test_exact_text_values_come_back_as_the_server_sent_them() -> None:
    """numeric, money, interval, and int8 arrays beyond 2**53, as PostgreSQL writes them."""
    sent = {"id": 1, "n": "0.0000001", "tiny": "0." + "0" * 19 + "1", "nan": "NaN", "zero": "0.00",
            "m": "$1,234.56", "i": "P1Y2M3DT4H5M6S", "ids": ["9007199254740993", 2.0]}
    columns = [Column("id", "int8", True, 1), Column("n", "numeric"), Column("tiny", "numeric"),
               Column("nan", "numeric"), Column("zero", "numeric"), Column("m", "money"), Column("i", "interval"),
               Column("ids", "_int8")]
    data = encoded(sent)
    for row in (RowDecoder(columns).row(data, 0, len(data)), RowDecoder(columns).decode(
            struct_pb2.Struct.FromString(data))):
        assert row == {**sent, "ids": [9007199254740993, 2]}


# -- layouts serializers do not write, but protobuf accepts --------------------------------------------------

def entry(body: bytes) -> bytes:
    return b"\x0a" + bytes([len(body)]) + body


KEY_A = b"\x0a\x01a"
STRING_X = b"\x12\x03\x1a\x01x"  # Value{string_value: "x"}


@pytest.mark.parametrize("data", [
    entry(STRING_X + KEY_A),  # value before key
    entry(KEY_A + b"\x12\x05\x38\x01\x1a\x01x"),  # an unknown field inside the Value
    entry(KEY_A) + entry(KEY_A + STRING_X),  # a duplicate key: the last wins
    entry(KEY_A),  # no value: no kind
    entry(STRING_X),  # no key: the empty name
    entry(KEY_A + b"\x12\x00"),  # an empty Value
    entry(KEY_A + b"\x12\x03\x08\x96\x01"),  # null_value as a two-byte varint
    entry(KEY_A + b"\x12\x03\x20\x80\x01"),  # a bool as a two-byte varint
    b"\x10\x01" + entry(KEY_A + STRING_X),  # an unknown field in the Struct
], ids=["value-first", "unknown-in-value", "duplicate-key", "no-value", "no-key",
        "empty-value", "long-null", "long-bool", "unknown-in-struct"])
def test_other_valid_layouts_decode_as_protobuf_reads_them(data: bytes) -> None:
    assert decoded(data) == through_protobuf(data)
    assert RowDecoder().row(data, 0, len(data)) == through_protobuf(data)


@pytest.mark.parametrize("data", [
    entry(KEY_A + b"\x12\x0c\x11" + b"\x00" * 8 + b"\x1a\x01x"),  # a number, then a string: the last wins
    entry(KEY_A + b"\x12\x02\x08\x00" + STRING_X),  # two values: protobuf merges them
    entry(KEY_A + b"\x18\x05" + STRING_X),  # an unknown field in the entry (upb drops the entry)
], ids=["two-kinds", "two-values", "unknown-in-entry"])
def test_what_implementations_may_read_differently_is_left_to_protobuf(data: bytes) -> None:
    with pytest.raises(NotCanonical):
        decoded(data)
    assert RowDecoder().row(data, 0, len(data)) == through_protobuf(data)


@pytest.mark.parametrize("data", [
    b"\x0a\x10" + KEY_A,  # an entry longer than the Struct
    entry(KEY_A + b"\x12\x09\x11\x00"),  # a number cut short
    entry(KEY_A + b"\x12\x03\x1a\x05x"),  # a string longer than its Value
    b"\x0a",  # a tag without a length
    b"\x0b\x00",  # wire type 3 (groups), which proto3 never writes
])
def test_truncated_or_malformed_bytes_raise_wire_error(data: bytes) -> None:
    with pytest.raises((WireError, IndexError)):
        RowDecoder().row(data, 0, len(data))


def test_decode_value_reads_a_bare_value() -> None:
    value = struct_pb2.Value(string_value="hi")
    data = value.SerializeToString()
    assert decode_value(data, 0, len(data)) == "hi"
    assert decode_value(b"", 0, 0) is None


# -- RowDecoder: shared rows ----------------------------------------------------------------------------------

COLUMNS = [Column("id", "int8", True, 1), Column("name", "text")]


def test_rows_decoded_from_the_same_bytes_are_shared_and_fields_reads_just_the_key() -> None:
    decoder = RowDecoder(COLUMNS)
    data = encoded({"id": 1, "name": "a"})
    row = decoder.row(data, 0, len(data))
    assert row == {"id": 1, "name": "a"} and decoder.row(bytes(data), 0, len(data)) is row
    other = encoded({"id": 2, "name": "b"})
    assert decoder.fields(other, 0, len(other), frozenset({"id"})) == {"id": 2}
    assert decoder.fields(data, 0, len(data), frozenset({"id"})) is row  # decoded already: the whole row
    assert decoder.decode(struct_pb2.Struct.FromString(data)) == row
    assert decoder.decode(struct_pb2.Struct.FromString(data)) is not row


def test_clients_with_the_same_integer_columns_share_one_decoder() -> None:
    first = shared_row_decoder(COLUMNS)
    assert shared_row_decoder(list(COLUMNS)) is first
    assert shared_row_decoder([Column("id", "text", True, 1)]) is not first


# -- round trips against the official serializer ---------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=200), json_values, max_size=8))
def test_any_struct_round_trips_through_the_official_serializer(values: dict[str, Any]) -> None:
    data = encoded(values)
    assert decoded(data) == through_protobuf(data)
    decoder = StructDecoder()
    decoder.decode(data, 0, len(data))  # headers learned from this row must not change the next decode
    assert decoder.decode(data, 0, len(data)) == through_protobuf(data)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "qty", "name", "note"]),
                       st.none() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.text(max_size=30)
                       | st.from_regex(r"-?[0-9]{1,25}", fullmatch=True)))
def test_integer_columns_match_the_documented_conversion(values: dict[str, Any]) -> None:
    data = encoded(values)
    row = RowDecoder([Column("id", "int8", True, 1), Column("qty", "int4")]).row(data, 0, len(data))
    for name, value in through_protobuf(data).items():
        if name in ("id", "qty") and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif name in ("id", "qty") and isinstance(value, str) and is_integer_text(value):
            value = int(value)
        assert row[name] == value and type(row[name]) is type(value)
