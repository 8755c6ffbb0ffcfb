"""Snapshot parts as Parquet files (`serializer = "parquet"`): typed columns where a value survives exactly.

A reader gets back exactly the rows a JSON-lines part of the same snapshot holds — the JSON-compatible values
of laredo_core.jsonvalue, absent columns included — while Spark, DuckDB or pandas read the files with column
types. Each column's type follows its PostgreSQL type (domains by their base type):

    bool → boolean; int2 → int16; int4 → int32; int8, oid → int64; float4, float8 → double (NaN and
    ±Infinity as IEEE values); bytea → binary; date → date32; time → time64[us]; timestamp → timestamp[us];
    timestamptz → timestamp[us, UTC]; text, varchar, char, name, uuid, interval, numeric (its exact text),
    timetz → string; json, jsonb, arrays and every other type → their JSON text (string).

A column falls back to JSON text in one part when one of its values does not fit its type exactly (a date
'infinity', a timestamp beyond year 9999, a value of another JSON type): the file's key-value metadata
`laredo.snapshot` says how each column is stored. Columns absent from a row (an unchanged TOASTed value
nobody knows) are named in a list<string> column, `__laredo_absent` unless the table has a column of that
name, null when the row is complete. Columns are the manifest's, in its order, then any other a row holds.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from laredo_core.changes import ColumnInfo
from laredo_core.pgtext import ARRAYS
from laredo_core.snapshots.errors import SnapshotCorrupt

METADATA_KEY = b"laredo.snapshot"
ABSENT_COLUMN = "__laredo_absent"
_MAX_EXACT = 2**53
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_dumps_ascii = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # lone surrogates as \uXXXX


class _NotExact(Exception):
    """A value that the column's type would not give back unchanged."""


@dataclass(frozen=True, slots=True)
class _Kind:
    """How one column type is stored: its Arrow type, JSON values → Arrow values (raises _NotExact when a value
    would not come back unchanged) and the Arrow column → JSON values."""

    name: str
    arrow: pa.DataType
    to_arrow: Callable[[list[Any]], list[Any]]
    from_arrow: Callable[[pa.ChunkedArray], list[Any]]


def _each(convert: Callable[[Any], Any]) -> Callable[[list[Any]], list[Any]]:
    def all_values(values: list[Any]) -> list[Any]:
        try:
            return [None if v is None else convert(v) for v in values]
        except (_NotExact, ValueError, TypeError, OverflowError, binascii.Error):
            raise _NotExact from None

    return all_values


def _plain(column: pa.ChunkedArray) -> list[Any]:
    return column.to_pylist()


def _isoformat(column: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else v.isoformat() for v in column.to_pylist()]


def _timestamps_from(epoch: dt.datetime) -> Callable[[pa.ChunkedArray], list[Any]]:
    """Timestamps as isoformat() text, by way of their microseconds (twice as fast as to_pylist() with a zone)."""
    def convert(column: pa.ChunkedArray) -> list[Any]:
        micros = column.cast(pa.int64()).to_pylist()
        return [None if v is None else (epoch + dt.timedelta(microseconds=v)).isoformat() for v in micros]

    return convert


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise _NotExact
    return v


def _int_within(bits: int) -> Callable[[Any], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def convert(v: Any) -> int:
        if type(v) is int and low <= v <= high and -_MAX_EXACT <= v <= _MAX_EXACT:
            return v
        if type(v) is str and bits == 64:  # beyond 2^53 jsonvalue writes the decimal text
            number = int(v)
            if low <= number <= high and abs(number) > _MAX_EXACT and str(number) == v:
                return number
        raise _NotExact

    return convert


def _int64_values(column: pa.ChunkedArray) -> list[Any]:
    values = column.to_pylist()
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or (-_MAX_EXACT <= low and high <= _MAX_EXACT):
        return values
    return [v if v is None or -_MAX_EXACT <= v <= _MAX_EXACT else str(v) for v in values]


def _float(v: Any) -> float:
    if type(v) is float and math.isfinite(v):
        return v
    if type(v) is str and v in _NON_FINITE:
        return _NON_FINITE[v]
    raise _NotExact


def _float_values(column: pa.ChunkedArray) -> list[Any]:
    values = column.to_pylist()
    if pc.all(pc.is_finite(column)).as_py() in (True, None):
        return values
    return [v if v is None or math.isfinite(v) else "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
            for v in values]


def _str(v: Any) -> str:
    if type(v) is not str:
        raise _NotExact
    return v


def _bytes(v: Any) -> bytes:
    data = base64.b64decode(_str(v), validate=True)
    if base64.b64encode(data).decode("ascii") != v:
        raise _NotExact
    return data


def _bytes_values(column: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else base64.b64encode(v).decode("ascii") for v in column.to_pylist()]


def _iso(parse: Callable[[str], Any], *, utc: bool = False) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        value = parse(_str(v))
        offset = value.utcoffset() if isinstance(value, (dt.time, dt.datetime)) else None
        if (offset != dt.timedelta(0) if utc else offset is not None) or value.isoformat() != v:
            raise _NotExact
        return value

    return convert


def _json_text(values: list[Any]) -> list[Any]:
    return [None if v is None else _dumps(v) for v in values]


def _json_values(column: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else json.loads(v) for v in column.to_pylist()]


_STRING = _Kind("string", pa.string(), _each(_str), _plain)
_JSON = _Kind("json", pa.string(), _json_text, _json_values)
_KINDS = {kind.name: kind for kind in (
    _Kind("bool", pa.bool_(), _each(_bool), _plain),
    _Kind("int16", pa.int16(), _each(_int_within(16)), _plain),
    _Kind("int32", pa.int32(), _each(_int_within(32)), _plain),
    _Kind("int64", pa.int64(), _each(_int_within(64)), _int64_values),
    _Kind("float64", pa.float64(), _each(_float), _float_values),
    _Kind("binary", pa.binary(), _each(_bytes), _bytes_values),
    _Kind("date", pa.date32(), _each(_iso(dt.date.fromisoformat)), _isoformat),
    _Kind("time", pa.time64("us"), _each(_iso(dt.time.fromisoformat)), _isoformat),
    _Kind("timestamp", pa.timestamp("us"), _each(_iso(dt.datetime.fromisoformat)),
          _timestamps_from(dt.datetime(1970, 1, 1))),
    _Kind("timestamptz", pa.timestamp("us", tz="UTC"), _each(_iso(dt.datetime.fromisoformat, utc=True)),
          _timestamps_from(dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))),
    _STRING, _JSON,
)}
_BY_OID = {
    16: "bool", 17: "binary", 18: "string", 19: "string", 20: "int64", 21: "int16", 23: "int32", 25: "string",
    26: "int64", 700: "float64", 701: "float64", 1042: "string", 1043: "string", 1082: "date", 1083: "time",
    1114: "timestamp", 1184: "timestamptz", 1186: "string", 1266: "string", 1700: "string", 2950: "string",
}


def kind_of(column: ColumnInfo) -> str:
    """The storage kind of a column (see the module's table); `json` for arrays and unknown types."""
    type_oid, type_name, base = column.type_oid, column.type_name, column.base_type_oid
    if type_oid in ARRAYS or (base and type_name.startswith("_")):
        return "json"
    if type_oid not in _BY_OID and base and base != type_oid:
        type_oid = base
    return _BY_OID.get(type_oid, "json")


def encode_parquet(rows: Sequence[Mapping[str, Any]], columns: Sequence[ColumnInfo]) -> bytes:
    """One Parquet file holding `rows` (JSON-compatible values); `columns` give the types (the manifest's)."""
    kinds = {c.name: kind_of(c) for c in columns}
    names = list(kinds)
    known = set(names)
    for row in rows:
        if row.keys() - known:
            extra = [name for name in row if name not in known]
            names += extra
            known.update(extra)
            kinds.update(dict.fromkeys(extra, "json"))
    absent_name = ABSENT_COLUMN
    while absent_name in known:
        absent_name += "_"
    fields, arrays, stored = [], [], []
    for name in names:
        kind, array = _column(_KINDS[kinds[name]], [row.get(name) for row in rows])
        fields.append(pa.field(name, kind.arrow))
        arrays.append(array)
        stored.append({"name": name, "kind": kind.name})
    absent = [None if row.keys() == known else [n for n in names if n not in row] for row in rows]
    fields.append(pa.field(absent_name, pa.list_(pa.string())))
    arrays.append(pa.array(absent, type=pa.list_(pa.string())))
    metadata = {"version": 1, "columns": stored, "absent_column": absent_name}
    schema = pa.schema(fields, metadata={METADATA_KEY: json.dumps(metadata).encode("utf-8")})
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), sink, compression="zstd")
    return sink.getvalue()


def _column(kind: _Kind, values: list[Any]) -> tuple[_Kind, pa.Array]:
    """The column as `kind` when every value survives it, else as JSON text (ASCII-escaped if it must be)."""
    try:
        return kind, pa.array(kind.to_arrow(values), type=kind.arrow)
    except (_NotExact, pa.ArrowException, UnicodeEncodeError):
        pass
    try:
        return _JSON, pa.array(_json_text(values), type=pa.string())
    except (pa.ArrowException, UnicodeEncodeError):  # a lone surrogate cannot be UTF-8
        return _JSON, pa.array([None if v is None else _dumps_ascii(v) for v in values], type=pa.string())


def decode_parquet(data: bytes, where: str) -> list[dict[str, Any]]:
    """The rows of a Parquet part, exactly as encode_parquet got them; SnapshotCorrupt when it is not one."""
    try:
        table = pq.read_table(io.BytesIO(data))
        document = json.loads((table.schema.metadata or {})[METADATA_KEY])
        stored = [(str(c["name"]), _KINDS[c["kind"]]) for c in document["columns"]]
        absent_name = str(document["absent_column"])
        columns = [kind.from_arrow(table.column(name)) for name, kind in stored]
        absent = table.column(absent_name).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise SnapshotCorrupt(f"{where}: not a readable Parquet file ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotCorrupt(f"{where}: not a laredo Parquet part (metadata {METADATA_KEY.decode()!r}: "
                              f"{type(exc).__name__}: {exc})") from None
    names = [name for name, _ in stored]
    rows = [dict(zip(names, values)) for values in zip(*columns)] if columns else [{} for _ in absent]
    for row, missing in zip(rows, absent):
        if missing:
            for name in missing:
                row.pop(name, None)
    return rows

