"""Parquet snapshot parts: the rows a JSON-lines part holds come back exactly, with typed columns where they fit."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laredo_kernel.changes import ColumnInfo
from laredo_kernel.jsonvalue import to_json_value
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.format import decode_part, decode_rows, encode_part
from laredo_core.snapshots.parquet import ABSENT_COLUMN, decode_parquet, encode_parquet, kind_of

COLUMNS = (
    ColumnInfo("id", 20, "int8", primary_key_ordinal=1, is_identity_key=True, not_null=True),
    ColumnInfo("flag", 16, "bool"), ColumnInfo("small", 21, "int2"), ColumnInfo("n", 23, "int4"),
    ColumnInfo("ratio", 700, "float4"), ColumnInfo("score", 701, "float8"), ColumnInfo("amount", 1700, "numeric"),
    ColumnInfo("name", 25, "text"), ColumnInfo("blob", 17, "bytea"), ColumnInfo("day", 1082, "date"),
    ColumnInfo("at", 1083, "time"), ColumnInfo("local", 1114, "timestamp"), ColumnInfo("utc", 1184, "timestamptz"),
    ColumnInfo("doc", 3802, "jsonb"), ColumnInfo("tags", 1009, "_text"), ColumnInfo("uid", 2950, "uuid"),
    ColumnInfo("mood", 16_500, "mood"), ColumnInfo("email", 16_600, "email", base_type_oid=25),
)
ARROW_TYPES = {
    "id": pa.int64(), "flag": pa.bool_(), "small": pa.int16(), "n": pa.int32(), "ratio": pa.float64(),
    "score": pa.float64(), "amount": pa.string(), "name": pa.string(), "blob": pa.binary(), "day": pa.date32(),
    "at": pa.time64("us"), "local": pa.timestamp("us"), "utc": pa.timestamp("us", tz="UTC"), "doc": pa.string(),
    "tags": pa.string(), "uid": pa.string(), "mood": pa.string(), "email": pa.string(),
}


def typed_row(i: int) -> dict[str, Any]:
    return {
        "id": i, "flag": i % 2 == 0, "small": -i % 30_000, "n": i * 7, "ratio": 1.1 * i, "score": i / 3,
        "amount": Decimal(f"{i}.50"), "name": f"row é {i}", "blob": bytes([i % 256, 0, 255]),
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=i), "at": dt.time(12, 30, i % 60, 1000 * i % 1_000_000),
        "local": dt.datetime(2026, 1, 2, 3, 4, 5, i), "utc": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
        "doc": {"k": [i, None, {"nested": "v"}], "f": 0.5}, "tags": ["a", None, "b"],
        "uid": "0b7e4c2a-0000-4000-8000-00000000000%d" % (i % 10), "mood": "happy", "email": f"u{i}@example.com",
    }


def json_rows(count: int) -> list[dict[str, Any]]:
    return [{name: to_json_value(value) for name, value in typed_row(i).items()} for i in range(count)]


def arrow_schema(data: bytes) -> pa.Schema:
    return pq.read_schema(io.BytesIO(data))


def test_rows_come_back_exactly_with_typed_columns() -> None:
    rows = json_rows(50)
    part, data = encode_part(2, rows, "parquet", COLUMNS)
    assert (part.name, part.rows, part.size_bytes) == ("rows-00002.parquet", 50, len(data))
    assert decode_part("parquet", data, "p") == rows
    schema = arrow_schema(data)
    assert {name: schema.field(name).type for name in ARROW_TYPES} == ARROW_TYPES
    assert schema.names == [c.name for c in COLUMNS] + [ABSENT_COLUMN]
    # what an analytics engine reads: typed values, nothing laredo-specific needed
    table = pq.read_table(io.BytesIO(data))
    assert table.column("day")[3].as_py() == dt.date(2026, 1, 4)
    assert table.column("blob")[1].as_py() == bytes([1, 0, 255])


def test_special_values_survive_and_unfit_values_fall_back_to_json_text() -> None:
    rows = json_rows(3)
    rows[0].update(id=str(2**60), score="NaN", ratio="-Infinity", day="infinity", local="294277-01-01 00:00:00")
    rows[1].update(id=-(2**53), score=None, day=None, small=None)
    rows[2].update(utc="2026-01-02T03:04:05+05:30", doc="just text", at="24:00:00")
    data = encode_parquet(rows, COLUMNS)
    assert decode_parquet(data, "p") == rows
    schema = arrow_schema(data)
    assert schema.field("id").type == pa.int64() and schema.field("score").type == pa.float64()
    assert schema.field("day").type == pa.string()  # 'infinity' is no date: this part keeps JSON text
    assert schema.field("utc").type == pa.string()  # a non-UTC offset would not come back unchanged
    assert schema.field("at").type == pa.string()


def test_absent_and_unknown_columns_are_kept_apart_from_nulls() -> None:
    rows = [{"id": 1, "name": None, "extra": {"x": 1}},  # doc absent (an unchanged TOASTed value), extra unknown
            {"id": 2, "name": "b", "doc": None},
            {"id": 3}]
    columns = (COLUMNS[0], ColumnInfo("name", 25), ColumnInfo("doc", 3802), ColumnInfo(ABSENT_COLUMN, 25))
    data = encode_parquet(rows, columns)
    decoded = decode_parquet(data, "p")
    assert decoded == rows
    assert [sorted(r) for r in decoded] == [sorted(r) for r in rows]
    schema = arrow_schema(data)
    assert schema.names == ["id", "name", "doc", ABSENT_COLUMN, "extra", ABSENT_COLUMN + "_"]


def test_an_empty_part_is_a_valid_file_with_the_schema() -> None:
    part, data = encode_part(0, [], "parquet", COLUMNS)
    assert part.rows == 0 and decode_part("parquet", data, "p") == []
    assert arrow_schema(data).field("utc").type == pa.timestamp("us", tz="UTC")
    assert decode_parquet(encode_parquet([{}, {}], ()), "p") == [{}, {}]


def test_both_formats_decode_to_the_same_rows() -> None:
    rows = json_rows(20)
    _, jsonl = encode_part(0, rows)
    _, parquet = encode_part(0, rows, "parquet", COLUMNS)
    assert decode_rows(jsonl, "j") == decode_part("parquet", parquet, "p") == rows


def test_damaged_or_foreign_files_are_reported() -> None:
    _, data = encode_part(0, json_rows(5), "parquet", COLUMNS)
    with pytest.raises(SnapshotCorrupt, match="p: not a readable Parquet file"):
        decode_parquet(data[: len(data) // 2], "p")
    with pytest.raises(SnapshotCorrupt, match="not a readable Parquet file"):
        decode_parquet(b'{"id": 1}\n', "p")
    foreign = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2]}), foreign)
    with pytest.raises(SnapshotCorrupt, match="not a laredo Parquet part"):
        decode_parquet(foreign.getvalue(), "p")
    mislabelled = io.BytesIO()  # laredo's metadata over columns of other types
    metadata = {"version": 1, "columns": [{"name": "day", "kind": "date"}, {"name": "at", "kind": "timestamptz"},
                                          {"name": "n", "kind": "int64"}], "absent_column": "gone"}
    pq.write_table(pa.table({"day": [1], "at": ["x"], "n": ["y"], "gone": [None]}).replace_schema_metadata(
        {b"laredo.snapshot": json.dumps(metadata).encode()}), mislabelled)
    with pytest.raises(SnapshotCorrupt, match="p: not a"):
        decode_parquet(mislabelled.getvalue(), "p")


def test_column_kinds_follow_the_postgres_type() -> None:
    assert [kind_of(c) for c in COLUMNS] == [
        "int64", "bool", "int16", "int32", "float64", "float64", "string", "string", "binary", "date", "time",
        "timestamp", "timestamptz", "json", "json", "string", "json", "string"]
    assert kind_of(ColumnInfo("a", 16_700, "_email", base_type_oid=25)) == "json"  # an array of a domain


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**60), 2**60), st.text(max_size=8),
                       st.floats(allow_nan=False, allow_infinity=False))
_json_value = st.recursive(_json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional={c.name: _json_value for c in COLUMNS}), max_size=8))
def test_any_json_rows_come_back_exactly(rows: list[dict[str, Any]]) -> None:
    """Whatever values a row holds (of its column's type or not), the part gives them back unchanged."""
    data = encode_parquet(rows, COLUMNS)
    assert json.dumps(decode_parquet(data, "p"), sort_keys=True) == json.dumps(rows, sort_keys=True)


def test_timestamps_at_the_edges_of_the_range_stay_typed() -> None:
    rows = json_rows(3)
    rows[0].update(local="0001-01-01T00:00:00", utc="1969-12-31T23:59:59.999999+00:00", day="0001-01-01")
    rows[1].update(local="9999-12-31T23:59:59.999999", utc="9999-12-31T23:59:59+00:00", at="00:00:00")
    data = encode_parquet(rows, COLUMNS)
    assert decode_parquet(data, "p") == rows
    schema = arrow_schema(data)
    assert {schema.field(n).type for n in ("local", "utc", "day", "at")} == {
        pa.timestamp("us"), pa.timestamp("us", tz="UTC"), pa.date32(), pa.time64("us")}


def test_text_that_is_not_valid_utf8_is_kept_as_escaped_json() -> None:
    rows = [{"id": 1, "name": "a\ud800b", "doc": {"k": "\udfff"}}, {"id": 2, "name": "ok", "doc": None}]
    columns = (COLUMNS[0], ColumnInfo("name", 25, "text"), ColumnInfo("doc", 3802, "jsonb"))
    data = encode_parquet(rows, columns)
    assert decode_parquet(data, "p") == rows
    assert arrow_schema(data).field("id").type == pa.int64()


_TYPED_COLUMNS = (ColumnInfo("i2", 21, "int2"), ColumnInfo("i4", 23, "int4"), ColumnInfo("i8", 20, "int8"),
                  ColumnInfo("f8", 701, "float8"), ColumnInfo("d", 1082, "date"), ColumnInfo("ts", 1114, "timestamp"),
                  ColumnInfo("tz", 1184, "timestamptz"), ColumnInfo("b", 16, "bool"))
_bounds = [2**15, 2**31, 2**53, 2**63]
_ints = st.one_of(st.sampled_from([b + d for b in _bounds for d in (-1, 0, 1)] + [-b + d for b in _bounds
                                                                                  for d in (-1, 0, 1)]),
                  st.integers(-(2**70), 2**70))
_canonical_times = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59))
ODD_TEXTS = ["infinity", "2026-02-30", "2026-02-30T10:00:00", "2026-01-01T00:00:00.000000",
             "2026-01-01T00:00:00.000000+00:00", "2026-01-01T24:00:00", "0000-01-01", "0000-01-01T00:00:00",
             "20260101", "2026-01-01 10:00:00", "2026-01-01T10:00:00+05:30", "2026-01-01T10:00:00Z",
             "2026-01-01T10:00:00.5+00:00", "2026-01-01T10:00:60"]
_odd_texts = st.sampled_from(ODD_TEXTS)
_typed_values = {
    "i2": st.one_of(_ints, st.integers(-300, 300)), "i4": _ints,
    "i8": st.one_of(_ints, _ints.map(str), st.booleans()),
    "f8": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["NaN", "Infinity", "x"]),
                    st.integers(-5, 5)),
    "d": st.one_of(st.dates().map(dt.date.isoformat), _odd_texts),
    "ts": st.one_of(_canonical_times.map(dt.datetime.isoformat), _odd_texts),
    "tz": st.one_of(_canonical_times.map(lambda t: t.replace(tzinfo=dt.timezone.utc).isoformat()), _odd_texts),
    "b": st.one_of(st.booleans(), st.integers(0, 1)),
}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional=_typed_values), max_size=6), st.sampled_from(sorted(_typed_values)))
def test_values_near_every_type_boundary_come_back_exactly(rows: list[dict[str, Any]], canonical: str) -> None:
    """Ints around each width's limits and 2^53, odd date and time text, bools among ints: exact either way,
    and a column of the usual shape only is stored typed."""
    data = encode_parquet(rows, _TYPED_COLUMNS)
    assert json.dumps(decode_parquet(data, "p"), sort_keys=True) == json.dumps(rows, sort_keys=True)
    usual = encode_parquet([{canonical: value} for value in (_USUAL[canonical], None)], _TYPED_COLUMNS)
    assert arrow_schema(usual).field(canonical).type != pa.string()


_USUAL = {"i2": -7, "i4": 2**31 - 1, "i8": 2**53, "f8": 0.5, "d": "2026-11-22", "ts": "2026-11-22T10:00:00.000001",
          "tz": "2026-11-22T10:00:00+00:00", "b": True}


@pytest.mark.parametrize("column", ["d", "ts", "tz"])
@pytest.mark.parametrize("odd", ODD_TEXTS)
def test_text_of_another_shape_than_isoformat_is_never_typed(column: str, odd: str) -> None:
    for rows in ([{column: odd}], [{column: _USUAL[column]}, {column: odd}, {}]):
        data = encode_parquet(rows, _TYPED_COLUMNS)
        assert decode_parquet(data, "p") == rows
        assert arrow_schema(data).field(column).type == pa.string()
