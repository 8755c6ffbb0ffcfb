"""How each column of a Parquet snapshot part is stored: its Arrow type, and exact conversions both ways.

Columns whose values all have the usual shape are converted by Arrow in one call (checked by value types, ranges
and a pattern); the others value by value in Python.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from laredo_kernel.changes import ColumnInfo
from laredo_kernel.pgtext import ARRAYS

_MAX_EXACT = 2**53
_NONE = type(None)
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_dumps_ascii = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # lone surrogates as \uXXXX
# What date.isoformat() / datetime.isoformat() write (years 0001-9999, microseconds only when not zero).
_DATE = r"(?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3})-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
_TIME = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{6})?"

ToArrow = Callable[[list[Any]], pa.Array]
FromArrow = Callable[[pa.ChunkedArray], list[Any]]


class NotExact(Exception):
    """A value that the column's type would not give back unchanged."""


@dataclass(frozen=True, slots=True)
class Kind:
    """name: as the file's metadata records it; to_arrow raises NotExact (or an Arrow error) when a value would
    not come back unchanged; from_arrow gives the values back."""

    name: str
    arrow: pa.DataType
    to_arrow: ToArrow
    from_arrow: FromArrow


def _each(convert: Callable[[Any], Any], arrow: pa.DataType) -> ToArrow:
    def to_arrow(values: list[Any]) -> pa.Array:
        try:
            return pa.array([None if v is None else convert(v) for v in values], type=arrow)
        except (NotExact, ValueError, TypeError, OverflowError, binascii.Error):
            raise NotExact from None

    return to_arrow


def _fast_or(fast: Callable[[list[Any]], pa.Array | None], slow: ToArrow) -> ToArrow:
    """`fast` converts the usual columns in one Arrow call (None: not this one), `slow` the rest."""
    def to_arrow(values: list[Any]) -> pa.Array:
        array = fast(values)
        return array if array is not None else slow(values)

    return to_arrow


def _only(values: list[Any], *types: type) -> bool:
    return set(map(type, values)) <= {_NONE, *types}


def _all(mask: pa.Array) -> bool:
    return pc.all(mask).as_py() in (True, None)  # None: every value is null


# -- conversions, one kind at a time ---------------------------------------------------------------------------

def _plain(column: pa.ChunkedArray) -> list[Any]:
    return column.to_pylist()


def _of_types(arrow: pa.DataType, *types: type) -> Callable[[list[Any]], pa.Array | None]:
    def fast(values: list[Any]) -> pa.Array | None:
        return pa.array(values, type=arrow) if _only(values, *types) else None

    return fast


def _never(v: Any) -> Any:
    raise NotExact


def _ints(bits: int) -> ToArrow:
    low, high = max(-(2 ** (bits - 1)), -_MAX_EXACT), min(2 ** (bits - 1) - 1, _MAX_EXACT)
    arrow = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits]

    def fast(values: list[Any]) -> pa.Array | None:
        if not _only(values, int):
            return None
        try:
            array = pa.array(values, type=pa.int64())
        except (pa.ArrowException, OverflowError):
            return None
        bounds = pc.min_max(array)
        least, most = bounds["min"].as_py(), bounds["max"].as_py()
        if least is not None and not (low <= least and most <= high):
            return None
        return array.cast(arrow)

    def exact(v: Any) -> int:
        if type(v) is int and low <= v <= high:
            return v
        if type(v) is str and bits == 64:  # beyond 2^53 jsonvalue writes the decimal text
            number = int(v)
            if -(2**63) <= number < 2**63 and abs(number) > _MAX_EXACT and str(number) == v:
                return number
        raise NotExact

    return _fast_or(fast, _each(exact, arrow))


def _int64_values(column: pa.ChunkedArray) -> list[Any]:
    values = column.to_pylist()
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or (-_MAX_EXACT <= low and high <= _MAX_EXACT):
        return values
    return [v if v is None or -_MAX_EXACT <= v <= _MAX_EXACT else str(v) for v in values]


def _floats(values: list[Any]) -> pa.Array | None:
    if not _only(values, float):
        return None
    array = pa.array(values, type=pa.float64())
    return array if _all(pc.is_finite(array)) else None  # an infinite float would come back as text


def _float(v: Any) -> float:
    if type(v) is float and math.isfinite(v):
        return v
    if type(v) is str and v in _NON_FINITE:
        return _NON_FINITE[v]
    raise NotExact


def _float_values(column: pa.ChunkedArray) -> list[Any]:
    values = column.to_pylist()
    if _all(pc.is_finite(column)):
        return values
    return [v if v is None or math.isfinite(v) else "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
            for v in values]


def _str(v: Any) -> str:
    if type(v) is not str:
        raise NotExact
    return v


def _bytes(v: Any) -> bytes:
    data = base64.b64decode(_str(v), validate=True)
    if base64.b64encode(data).decode("ascii") != v:
        raise NotExact
    return data


def _bytes_values(column: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else base64.b64encode(v).decode("ascii") for v in column.to_pylist()]


def _parsed(pattern: str, arrow: pa.DataType) -> Callable[[list[Any]], pa.Array | None]:
    """Text in the one form isoformat() writes, parsed by Arrow (which refuses impossible dates)."""
    def fast(values: list[Any]) -> pa.Array | None:
        if not _only(values, str):
            return None
        text = pa.array(values, type=pa.string())
        if not _all(pc.match_substring_regex(text, f"^{pattern}$")) or not _all(
                pc.invert(pc.match_substring(text, ".000000"))):
            return None
        try:
            return text.cast(arrow)
        except pa.ArrowException:
            return None

    return fast


def _iso(parse: Callable[[str], Any], *, utc: bool = False) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        value = parse(_str(v))
        offset = value.utcoffset() if isinstance(value, (dt.time, dt.datetime)) else None
        if (offset != dt.timedelta(0) if utc else offset is not None) or value.isoformat() != v:
            raise NotExact
        return value

    return convert


def _isoformat(column: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else v.isoformat() for v in column.to_pylist()]


def _timestamps_from(epoch: dt.datetime) -> FromArrow:
    """Timestamps as isoformat() text, by way of their microseconds (twice as fast as to_pylist() with a zone)."""
    def convert(column: pa.ChunkedArray) -> list[Any]:
        micros = column.cast(pa.int64()).to_pylist()
        return [None if v is None else (epoch + dt.timedelta(microseconds=v)).isoformat() for v in micros]

    return convert


def json_text(values: list[Any]) -> pa.Array:
    """Any JSON-compatible values as JSON text (ASCII-escaped when a string cannot be UTF-8)."""
    try:
        return pa.array([None if v is None else _dumps(v) for v in values], type=pa.string())
    except (pa.ArrowException, UnicodeEncodeError):  # a lone surrogate
        return pa.array([None if v is None else _dumps_ascii(v) for v in values], type=pa.string())


def _json_values(column: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else json.loads(v) for v in column.to_pylist()]


def _kind(name: str, arrow: pa.DataType, fast: Callable[[list[Any]], pa.Array | None] | None,
          exact: Callable[[Any], Any], from_arrow: FromArrow) -> Kind:
    slow = _each(exact, arrow)
    return Kind(name, arrow, _fast_or(fast, slow) if fast is not None else slow, from_arrow)


_UTC = pa.timestamp("us", tz="UTC")
JSON = Kind("json", pa.string(), json_text, _json_values)
KINDS = {kind.name: kind for kind in (
    _kind("bool", pa.bool_(), _of_types(pa.bool_(), bool), _never, _plain),
    Kind("int16", pa.int16(), _ints(16), _plain),
    Kind("int32", pa.int32(), _ints(32), _plain),
    Kind("int64", pa.int64(), _ints(64), _int64_values),
    _kind("float64", pa.float64(), _floats, _float, _float_values),
    _kind("binary", pa.binary(), None, _bytes, _bytes_values),
    _kind("date", pa.date32(), _parsed(_DATE, pa.date32()), _iso(dt.date.fromisoformat), _isoformat),
    _kind("time", pa.time64("us"), None, _iso(dt.time.fromisoformat), _isoformat),
    _kind("timestamp", pa.timestamp("us"), _parsed(f"{_DATE}T{_TIME}", pa.timestamp("us")),
          _iso(dt.datetime.fromisoformat), _timestamps_from(dt.datetime(1970, 1, 1))),
    _kind("timestamptz", _UTC, _parsed(fr"{_DATE}T{_TIME}\+00:00", _UTC), _iso(dt.datetime.fromisoformat, utc=True),
          _timestamps_from(dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))),
    _kind("string", pa.string(), _of_types(pa.string(), str), _str, _plain),
    JSON,
)}
_BY_OID = {
    16: "bool", 17: "binary", 18: "string", 19: "string", 20: "int64", 21: "int16", 23: "int32", 25: "string",
    26: "int64", 700: "float64", 701: "float64", 1042: "string", 1043: "string", 1082: "date", 1083: "time",
    1114: "timestamp", 1184: "timestamptz", 1186: "string", 1266: "string", 1700: "string", 2950: "string",
}


def kind_of(column: ColumnInfo) -> str:
    """The storage kind of a column (see laredo_core.snapshots.parquet); `json` for arrays and unknown types."""
    type_oid, type_name, base = column.type_oid, column.type_name, column.base_type_oid
    if type_oid in ARRAYS or (base and type_name.startswith("_")):
        return "json"
    if type_oid not in _BY_OID and base and base != type_oid:
        type_oid = base
    return _BY_OID.get(type_oid, "json")
