"""decode_batch's fast paths: typed and JSON-form rows equal what the exact text path gives, errors included."""

import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import ColumnInfo
from laredo_kernel.errors import ProtocolError
from laredo_kernel.jsonvalue import row_to_json
from laredo_core.stream.codec import columns_to_proto, decode_batch, typed_row
from laredo_kernel.tuples import UNCHANGED, decode_tuple_exact, encode_tuple

SAMPLES: list[tuple[int, str, int, str]] = [  # (type oid, type name, base type oid, text form)
    (16, "bool", 0, "t"), (16, "bool", 0, "f"), (20, "int8", 0, "9223372036854775807"), (20, "int8", 0, "-42"),
    (20, "int8", 0, str(2**53)), (20, "int8", 0, str(2**53 + 1)), (21, "int2", 0, "-7"), (23, "int4", 0, "5"),
    (26, "oid", 0, "4294967295"), (700, "float4", 0, "1.5"), (701, "float8", 0, "NaN"),
    (701, "float8", 0, "-Infinity"), (701, "float8", 0, "1e308"), (1700, "numeric", 0, "0.0000001"),
    (1700, "numeric", 0, "0.00000000000000000001"), (1700, "numeric", 0, "-0.000001"), (1700, "numeric", 0, "0.00"),
    (1231, "_numeric", 0, "{0.0000001,NULL,1.50}"), (99995, "amount", 1700, "0.0000001"),
    (1700, "numeric", 0, "12345678901234567890.000000001"), (1700, "numeric", 0, "NaN"),
    (25, "text", 0, "héllo"), (1042, "bpchar", 0, "c  "), (17, "bytea", 0, "\\x00ff"),
    (114, "json", 0, '{"a": [1, 2.5, null, 9007199254740993]}'), (3802, "jsonb", 0, '{"b": true}'),
    (1082, "date", 0, "2026-11-22"), (1082, "date", 0, "infinity"), (1083, "time", 0, "13:45:01.5"),
    (1114, "timestamp", 0, "2026-11-22 13:45:01.123456"), (1184, "timestamptz", 0, "2026-11-22 13:45:01+00"),
    (1266, "timetz", 0, "13:45:01+05:30"), (1186, "interval", 0, "P1Y2M3DT4H5M6S"),
    (1007, "_int4", 0, "{1,NULL,3}"), (1016, "_int8", 0, "{9223372036854775807}"),
    (99999, "mood", 25, "happy"), (99998, "positive_int", 23, "5"), (99997, "_mood", 25, "{sad,happy}"),
    (99996, "geometry", 0, "POINT(1 2)"), (2950, "uuid", 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
]


def one_column_batch(oid: int, name: str, base: int, raw: Any, *, key_only: bool = False) -> bytes:
    columns = (ColumnInfo("k", 23, "int4", is_identity_key=True), ColumnInfo("v", oid, name, base_type_oid=base))
    change = pb.Change(action=pb.ACTION_DELETE, old_tuple=encode_tuple([b"1", raw]), old_is_key_only=key_only) \
        if key_only else pb.Change(action=pb.ACTION_INSERT, new_tuple=encode_tuple([b"1", raw]))
    return pb.ChangeBatch(source_id="pg", kind=pb.BATCH_KIND_TRANSACTION, table=pb.TableRef(schema="s", name="t"),
                          columns=columns_to_proto(columns), commit_lsn=1, changes=[change]).SerializeToString()


def exact(data: bytes, json_values: bool) -> dict[str, Any]:
    """The reference: decode the tuple, convert text values one by one, then map them to JSON."""
    message = pb.ChangeBatch.FromString(data)
    change = message.changes[0]
    info_columns = tuple(ColumnInfo(c.name, c.type_oid, c.type_name, base_type_oid=c.base_type_oid,
                                    is_identity_key=c.is_identity_key) for c in message.columns)
    raw = change.new_tuple or change.old_tuple
    row = typed_row(info_columns, decode_tuple_exact(raw), key_only=change.old_is_key_only)
    return row_to_json(row) if json_values else row


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, Decimal) and isinstance(b, Decimal) and a.is_nan():
        return b.is_nan()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(("oid", "name", "base", "text"), SAMPLES)
@pytest.mark.parametrize("json_values", [False, True])
def test_fast_paths_equal_the_exact_conversion(oid: int, name: str, base: int, text: str, json_values: bool) -> None:
    data = one_column_batch(oid, name, base, text.encode())
    row = decode_batch(data, json_values=json_values).changes[0].new
    expected = exact(data, json_values)
    assert row is not None and row.keys() == expected.keys()
    assert all(same(row[k], expected[k]) for k in row), (row, expected)


def test_unchanged_and_null_and_key_only_rows() -> None:
    data = one_column_batch(25, "text", 0, UNCHANGED)
    assert decode_batch(data, json_values=True).changes[0].new == {"k": 1, "v": UNCHANGED}
    assert decode_batch(one_column_batch(25, "text", 0, None), json_values=True).changes[0].new == {"k": 1, "v": None}
    key_only = decode_batch(one_column_batch(25, "text", 0, None, key_only=True), json_values=True)
    assert key_only.changes[0].old == {"k": 1}


@settings(max_examples=300, deadline=None)
@given(sample=st.sampled_from(SAMPLES), raw=st.binary(max_size=24), json_values=st.booleans())
def test_random_values_give_the_same_result_or_the_same_error(sample: tuple[int, str, int, str], raw: bytes,
                                                              json_values: bool) -> None:
    oid, name, base, _ = sample
    data = one_column_batch(oid, name, base, raw)
    try:
        expected: Any = exact(data, json_values)
    except ProtocolError as exc:
        with pytest.raises(ProtocolError) as caught:
            decode_batch(data, json_values=json_values)
        assert str(caught.value) == str(exc)
        return
    row = decode_batch(data, json_values=json_values).changes[0].new
    assert row is not None and all(same(row[k], expected[k]) for k in expected)


@pytest.mark.parametrize(("oid", "name", "base", "text", "json"), [
    (1700, "numeric", 0, "0.0000001", "0.0000001"), (1700, "numeric", 0, "0.00000000000000000001",
                                                     "0.00000000000000000001"),
    (1231, "_numeric", 0, "{0.0000001,NULL,1.50}", ["0.0000001", None, "1.50"]),
    (99995, "amount", 1700, "1.0000000", "1.0000000"),
])
def test_numeric_rows_carry_postgresql_text(oid: int, name: str, base: int, text: str, json: Any) -> None:
    """What fan-out and dead letters hand to clients: PostgreSQL's numeric text, never 1E-7."""
    assert decode_batch(one_column_batch(oid, name, base, text.encode()), json_values=True).changes[0].new == {
        "k": 1, "v": json}


def test_columns_are_decoded_once_per_column_set_and_each_message_reads_its_own() -> None:
    first = decode_batch(one_column_batch(23, "int4", 0, b"5"), json_values=True)
    again = decode_batch(one_column_batch(23, "int4", 0, b"6"), json_values=True)
    assert again.columns is first.columns and again.changes[0].new == {"k": 1, "v": 6}
    retyped = decode_batch(one_column_batch(25, "text", 0, b"6"), json_values=True)  # the column changed type
    assert retyped.columns[1].type_oid == 25 and retyped.changes[0].new == {"k": 1, "v": "6"}
    typed = decode_batch(one_column_batch(1700, "numeric", 0, b"6.50"))  # typed values: a plan of their own
    assert typed.changes[0].new == {"k": 1, "v": Decimal("6.50")}
    assert decode_batch(one_column_batch(1700, "numeric", 0, b"6.50"), json_values=True).changes[0].new["v"] == "6.50"
