"""Snapshot rows (JSON-compatible values) back to the typed values the stream codec gives, per column type.

The inverse of laredo_kernel.jsonvalue for the types laredo_kernel.pgtext converts: services that hold typed rows
(query) load snapshots with it and get the values a stream-built table holds: int8 beyond 2^53 from its
decimal string, numeric as Decimal, bytea from base64, dates and times parsed from ISO 8601 (PostgreSQL text
such as 'infinity' stays text, as pgtext leaves it), floats from "NaN"/"Infinity", arrays element by element.
Columns absent from a row stay absent; unknown types keep their JSON value.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from laredo_kernel.changes import ColumnInfo
from laredo_kernel.pgtext import ARRAYS

FromJson = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _int(value: Any) -> Any:
    return int(value) if isinstance(value, str) else value


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else value


def _decimal(value: Any) -> Any:
    return Decimal(value) if isinstance(value, str) else Decimal(str(value)) if isinstance(value, (int, float)) \
        and not isinstance(value, bool) else value


def _bytes(value: Any) -> Any:
    return base64.b64decode(value) if isinstance(value, str) else value


def _parsed(parse: Callable[[str], Any]) -> FromJson:
    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return parse(value)
        except ValueError:
            return value  # infinity, BC dates, years beyond 9999: text, as pgtext keeps them

    return convert


SCALARS: dict[int, FromJson] = {
    17: _bytes, 20: _int, 21: _int, 23: _int, 26: _int, 700: _float, 701: _float, 1700: _decimal,
    1082: _parsed(dt.date.fromisoformat), 1083: _parsed(dt.time.fromisoformat),
    1114: _parsed(dt.datetime.fromisoformat), 1184: _parsed(dt.datetime.fromisoformat),
    1266: _parsed(dt.time.fromisoformat),
}


def _for(type_oid: int, type_name: str, base_type_oid: int) -> FromJson:
    """The converter of one column type (its base type for domains and enums, element by element for arrays)."""
    if type_oid in SCALARS:
        return SCALARS[type_oid]
    if type_oid in ARRAYS:
        return _array_of(SCALARS.get(ARRAYS[type_oid], _same))
    if base_type_oid and type_name.startswith("_"):
        return _array_of(_for(base_type_oid, "", 0))
    if base_type_oid and base_type_oid != type_oid:
        return _for(base_type_oid, "", 0)
    return _same


def _array_of(element: FromJson) -> FromJson:
    if element is _same:
        return _same

    def convert(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [convert(v) if isinstance(v, list) else None if v is None else element(v) for v in value]

    return convert


def typed_rows(columns: Sequence[ColumnInfo], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every row with its values converted by its column's type (columns the manifest does not list kept)."""
    converters = {c.name: f for c in columns if (f := _for(c.type_oid, c.type_name, c.base_type_oid)) is not _same}
    if not converters:
        return [dict(row) for row in rows]
    return [{name: (value if value is None or name not in converters else converters[name](value))
             for name, value in row.items()} for row in rows]
