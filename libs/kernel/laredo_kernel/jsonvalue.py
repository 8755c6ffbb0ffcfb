"""Typed row values to JSON-compatible values, as clients see them (protobuf Struct, JSON lines).

Mapping: bool, str, None as is; int as a number when exactly representable in a double (|v| <= 2**53), else as
a decimal string; float as a number (NaN and infinities as the strings "NaN", "Infinity", "-Infinity"); Decimal
as its exact string in PostgreSQL's numeric text form (positional, never an exponent: 0.0000001, not 1E-7;
trailing zeros kept: 1.50); bytes as base64 (the protobuf JSON convention); dates and times as ISO 8601 strings;
JSON documents and arrays as nested values.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from decimal import Decimal
from typing import Any

_MAX_EXACT = 2**53


def to_json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -_MAX_EXACT <= value <= _MAX_EXACT else str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        return numeric_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    return str(value)


def numeric_text(value: Decimal) -> str:
    """PostgreSQL's text form of a numeric: every digit of the value at its scale, no exponent (str() of a
    Decimal writes 1E-7 for 0.0000001). NaN and the infinities as PostgreSQL writes them."""
    return format(value, "f")


def row_to_json(row: dict[str, Any]) -> dict[str, Any]:
    return {name: to_json_value(value) for name, value in row.items()}
