"""Snapshot rows back to typed values: the values a stream-built (typed) table holds, for every converted type."""

from __future__ import annotations

from laredo_kernel.changes import ColumnInfo
from laredo_kernel.jsonvalue import row_to_json
from laredo_kernel.pgtext import converter_for
from laredo_core.snapshots.typed_rows import typed_rows

COLUMNS = (
    ColumnInfo("id", 20, "int8"), ColumnInfo("small", 21, "int2"), ColumnInfo("big", 20, "int8"),
    ColumnInfo("amount", 1700, "numeric"), ColumnInfo("nan", 1700, "numeric"), ColumnInfo("score", 701, "float8"),
    ColumnInfo("inf", 701, "float8"), ColumnInfo("blob", 17, "bytea"), ColumnInfo("day", 1082, "date"),
    ColumnInfo("forever", 1082, "date"), ColumnInfo("at", 1184, "timestamptz"),
    ColumnInfo("local", 1114, "timestamp"), ColumnInfo("clock", 1083, "time"), ColumnInfo("zoned", 1266, "timetz"),
    ColumnInfo("tags", 1016, "_int8"), ColumnInfo("days", 1182, "_date"), ColumnInfo("doc", 3802, "jsonb"),
    ColumnInfo("name", 25, "text"), ColumnInfo("flag", 16, "bool"), ColumnInfo("span", 1186, "interval"),
    ColumnInfo("mood", 16500, "mood", base_type_oid=25), ColumnInfo("measure", 16600, "dom", base_type_oid=1700),
    ColumnInfo("grid", 1007, "_int4"),
)
TEXT = {
    "id": "7", "small": "-3", "big": "9223372036854775807", "amount": "12.50", "nan": "NaN", "score": "-0.25",
    "inf": "-Infinity", "blob": "\\x00ff10", "day": "2026-01-02", "forever": "infinity",
    "at": "2026-11-22 13:45:01.5+00", "local": "2026-11-22 13:45:01", "clock": "13:45:01.25",
    "zoned": "13:45:01+05:30", "tags": "{1,NULL,9223372036854775807}", "days": "{2026-01-02,infinity}",
    "doc": '{"a": [1, 2.5], "b": null}', "name": "x", "flag": "t", "span": "P1DT2H", "mood": "happy",
    "measure": "1E-7", "grid": "{{1,2},{3,NULL}}",
}


def typed(name: str, text: str) -> object:
    column = next(c for c in COLUMNS if c.name == name)
    return converter_for(column.type_oid, column.type_name, column.base_type_oid)(text)


def test_json_rows_come_back_as_the_typed_values_of_the_stream() -> None:
    stream_row = {name: typed(name, text) for name, text in TEXT.items()}
    back = typed_rows(COLUMNS, [row_to_json(stream_row)])[0]
    differing = {k for k in stream_row if k != "nan" and back[k] != stream_row[k]}
    assert not differing, {k: (back[k], stream_row[k]) for k in differing}
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in stream_row.items()}
    assert str(back["nan"]) == "NaN"


def test_nulls_absent_columns_and_unlisted_columns_are_kept() -> None:
    rows = typed_rows(COLUMNS, [{"id": 1, "amount": None, "extra": "kept"}])
    assert rows == [{"id": 1, "amount": None, "extra": "kept"}]
