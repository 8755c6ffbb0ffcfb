"""PostgreSQL text-form values to typed Python values, one converter per column type.

Baseline (COPY text) and stream (pgoutput text tuples) carry the same text forms, produced under the same session
settings (SESSION_SETTINGS), so one converter gives identical values for both. Unknown types keep their text.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from laredo_kernel.errors import ProtocolError
from laredo_kernel.jsonvalue import numeric_text, to_json_value

Converter = Callable[[str], Any]
#: Converts the raw text-form bytes of one value; the fast path of the stream codec.
BytesConverter = Callable[[bytes], Any]

#: Session settings every connection that produces text values must use.
SESSION_SETTINGS: dict[str, str] = {
    "DateStyle": "ISO, YMD",
    "IntervalStyle": "iso_8601",
    "TimeZone": "UTC",
    "extra_float_digits": "3",
    "bytea_output": "hex",
}


def _bool(text: str) -> bool:
    return text == "t"


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("bytea is not in hex format (bytea_output must be 'hex')")
    return bytes.fromhex(text[2:])


def _or_text(parse: Converter) -> Converter:
    """`parse`, keeping the text PostgreSQL wrote where Python has no value: infinity, -infinity, BC dates,
    years beyond 9999."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError:
            return text

    return convert


_date, _timestamp = _or_text(dt.date.fromisoformat), _or_text(dt.datetime.fromisoformat)
# float() accepts NaN, Infinity and -Infinity; time.fromisoformat (Python 3.11) PostgreSQL's '+05' offsets.
SCALARS: dict[int, Converter] = {
    16: _bool,
    17: _bytea,
    18: str,  # "char"
    19: str,  # name
    20: int,
    21: int,
    23: int,
    25: str,
    26: int,  # oid
    114: json.loads,
    700: float,
    701: float,
    1042: str,  # bpchar
    1043: str,  # varchar
    1082: _date,
    1083: dt.time.fromisoformat,
    1114: _timestamp,
    1184: _timestamp,
    1186: str,  # interval, ISO 8601 duration text
    1266: dt.time.fromisoformat,
    1700: Decimal,
    2950: str,  # uuid
    3802: json.loads,
}

#: Array type OID → element type OID, for the built-in arrays.
ARRAYS: dict[int, int] = {
    1000: 16, 1001: 17, 1002: 18, 1003: 19, 1016: 20, 1005: 21, 1007: 23, 1009: 25,
    1028: 26, 199: 114, 1021: 700, 1022: 701, 1014: 1042, 1015: 1043, 1182: 1082,
    1183: 1083, 1115: 1114, 1185: 1184, 1187: 1186, 1270: 1266, 1231: 1700,
    2951: 2950, 3807: 3802,
}  # fmt: skip


def converter_for(type_oid: int, type_name: str = "", base_type_oid: int = 0) -> Converter:
    """The converter for a column type; base_type_oid is the element (arrays) or base (domains, enums)."""
    if type_oid in SCALARS:
        return SCALARS[type_oid]
    if type_oid in ARRAYS:
        return _array_of(SCALARS[ARRAYS[type_oid]])
    if base_type_oid and type_name.startswith("_"):
        return _array_of(converter_for(base_type_oid))
    if base_type_oid and base_type_oid != type_oid:
        return converter_for(base_type_oid)
    return str


def _array_of(element: Converter) -> Converter:
    def convert(text: str) -> list[Any]:
        value, end = _parse_array(text, 0, element)
        if end != len(text):
            raise ValueError(f"trailing characters after array literal at {end}")
        return value

    return convert


def _parse_array(text: str, pos: int, element: Converter) -> tuple[list[Any], int]:
    if text.startswith("[", pos):  # explicit bounds "[0:1]={…}": drop them
        pos = text.index("=", pos) + 1
    if not text.startswith("{", pos):
        raise ValueError(f"array literal must start with '{{' at {pos}")
    pos += 1
    items: list[Any] = []
    if text.startswith("}", pos):
        return items, pos + 1
    while True:
        if text.startswith("{", pos):
            item, pos = _parse_array(text, pos, element)
            items.append(item)
        elif text.startswith('"', pos):
            chars, pos = [], pos + 1
            while text[pos] != '"':
                if text[pos] == "\\":
                    pos += 1
                chars.append(text[pos])
                pos += 1
            items.append(element("".join(chars)))
            pos += 1
        else:
            end = pos
            while text[end] not in ",}":
                end += 1
            token = text[pos:end]
            items.append(None if token == "NULL" else element(token))
            pos = end
        if text[pos] == "}":
            return items, pos + 1
        if text[pos] != ",":
            raise ValueError(f"expected ',' or '}}' in array literal at {pos}")
        pos += 1


def convert_text(converter: Converter, raw: bytes, column: str) -> Any:
    """Convert one value, wrapping any failure in a ProtocolError naming the column."""
    try:
        return converter(raw.decode("utf-8"))
    except (ValueError, IndexError, UnicodeDecodeError, json.JSONDecodeError, ArithmeticError) as exc:
        preview = raw[:40]
        raise ProtocolError(f"column {column!r}: cannot convert value {preview!r}: {exc}") from exc


_MAX_EXACT = 2**53


def _int8_json(raw: bytes) -> int | str:
    value = int(raw)
    return value if -_MAX_EXACT <= value <= _MAX_EXACT else str(value)


def _float_json(raw: bytes) -> Any:
    value = float(raw)
    return value if value - value == 0 else to_json_value(value)  # NaN and infinities become strings


def _numeric_json(raw: bytes) -> str:
    return numeric_text(Decimal(raw.decode("utf-8")))  # PostgreSQL's own text, checked to be a numeric


def _bool_bytes(raw: bytes) -> bool:
    if raw == b"t" or raw == b"f":
        return raw == b"t"
    return raw.decode("utf-8") == "t"  # raises on invalid UTF-8, as the text path does


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8")


def _iso_json(parse: Callable[[str], dt.date]) -> BytesConverter:
    """As _or_text(parse), then to_json_value: the ISO 8601 text of the value, or PostgreSQL's own."""

    def convert(raw: bytes) -> str:
        text = raw.decode("utf-8")
        try:
            return parse(text).isoformat()
        except ValueError:
            return text

    return convert


def _time_json(raw: bytes) -> str:
    return dt.time.fromisoformat(raw.decode("utf-8")).isoformat()


def _effective_scalar(type_oid: int, type_name: str, base_type_oid: int) -> int | None:
    """The scalar type whose converter converter_for() picks, or None for arrays and unknown types."""
    if type_oid in SCALARS:
        return type_oid
    if type_oid in ARRAYS or (base_type_oid and type_name.startswith("_")):
        return None
    if base_type_oid and base_type_oid != type_oid:
        return _effective_scalar(base_type_oid, "", 0)
    return None


_TEXT_OIDS = frozenset({18, 19, 25, 1042, 1043, 1186, 2950})
_TYPED_FROM_BYTES: dict[int, BytesConverter] = {16: _bool_bytes, 20: int, 21: int, 23: int, 26: int}
_TIMESTAMP_JSON = _iso_json(dt.datetime.fromisoformat)
_JSON_FROM_BYTES: dict[int, BytesConverter] = {
    16: _bool_bytes, 20: _int8_json, 21: int, 23: int, 26: int, 700: _float_json, 701: _float_json,
    1700: _numeric_json, 1082: _iso_json(dt.date.fromisoformat), 1083: _time_json, 1114: _TIMESTAMP_JSON,
    1184: _TIMESTAMP_JSON, 1266: _time_json,
}


def bytes_converter_for(type_oid: int, type_name: str = "", base_type_oid: int = 0, *,
                        json_values: bool = False) -> BytesConverter:
    """Raw text-form bytes to the value converter_for() gives (json_values: as to_json_value() maps it).

    Equal results to decoding the bytes as UTF-8 and calling the text converter (then to_json_value);
    on malformed input it may raise other exceptions than that path, so callers that need the precise
    error redo the conversion with convert_text().
    """
    scalar = _effective_scalar(type_oid, type_name, base_type_oid)
    fast = (_JSON_FROM_BYTES if json_values else _TYPED_FROM_BYTES).get(scalar) if scalar is not None else None
    if fast is not None:
        return fast
    if scalar in _TEXT_OIDS or (scalar is None and converter_for(type_oid, type_name, base_type_oid) is str):
        return _utf8
    text_converter = converter_for(type_oid, type_name, base_type_oid)
    if not json_values:
        if text_converter is float:
            return float
        return lambda raw: text_converter(raw.decode("utf-8"))
    return lambda raw: to_json_value(text_converter(raw.decode("utf-8")))
