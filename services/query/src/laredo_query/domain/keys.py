"""Key values in one canonical form, so a request's key matches the key a stored row holds.

Each key column gets a KeyKind from its PostgreSQL type. Rows hold JSON-compatible values (laredo_kernel.jsonvalue:
what clients see), and a stored value becomes canonical as follows: INTEGER an int (integers beyond 2**53 are
decimal strings in rows), FLOAT a float ('NaN', 'Infinity' and '-Infinity' are strings in rows), NUMERIC a
Decimal (rows hold PostgreSQL's text of it), BOOL a bool; TEXT values stay as rows show them (str: dates,
timestamps, bytea too); DOCUMENT values (json, jsonb, arrays) are made hashable.

A request value (a JSON value: null, number, string, bool, list, object) is coerced to the column's kind:
- INTEGER: a number with no fractional part (5 and 5.0 both match 5) or a decimal string ("5",
  "9007199254740993": integers beyond 2**53 must travel as strings, as rows show them);
- FLOAT: a number, or a string float() accepts ("NaN" never matches anything);
- NUMERIC: a number (by its shortest decimal form: 0.1 is 0.1) or a decimal string; compared by value,
  so 1.5 matches 1.50;
- BOOL: true/false, or the strings "true"/"false";
- TEXT: a string, compared exactly (code points; char(n) keeps its padding);
- DOCUMENT: any JSON value, compared structurally (numbers by value, object keys in any order);
- null matches NULL in non-unique indexes only (unique indexes leave NULL keys out, as SQL does).
Anything else is an InvalidKey naming the column and what to send.

A key is the bare canonical value for one-column keys and a tuple of them otherwise.
"""

from __future__ import annotations

import contextlib
import enum
import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from laredo_kernel.changes import ColumnInfo
from laredo_kernel.jsonvalue import to_json_value
from laredo_kernel.pgtext import ARRAYS, SCALARS
from laredo_kernel.rows import hashable

from laredo_query.domain.errors import InvalidKey

Key = Any
_WHOLE_NUMBER = re.compile(r"[+-]?\d+")


class KeyKind(enum.Enum):
    INTEGER = "integer"
    FLOAT = "float"
    NUMERIC = "numeric"
    BOOL = "boolean"
    TEXT = "text"
    DOCUMENT = "document"


_KINDS_BY_OID = {16: KeyKind.BOOL, 20: KeyKind.INTEGER, 21: KeyKind.INTEGER, 23: KeyKind.INTEGER,
                 26: KeyKind.INTEGER, 700: KeyKind.FLOAT, 701: KeyKind.FLOAT, 1700: KeyKind.NUMERIC,
                 114: KeyKind.DOCUMENT, 3802: KeyKind.DOCUMENT}


def kind_of(column: ColumnInfo) -> KeyKind:
    """The kind of a column from its type, following domains and enums to their base type."""
    oid = column.type_oid
    if oid in ARRAYS or column.type_name.startswith("_"):
        return KeyKind.DOCUMENT
    if oid not in SCALARS and column.base_type_oid and column.base_type_oid != oid:
        oid = column.base_type_oid
        if oid in ARRAYS:
            return KeyKind.DOCUMENT
    return _KINDS_BY_OID.get(oid, KeyKind.TEXT)


def _stored_integer(value: Any) -> Any:
    return value if value is None or type(value) is int else _integer(value)


def _stored_float(value: Any) -> Any:
    return value if value is None or type(value) is float else float(value)


def _stored_numeric(value: Any) -> Any:
    return None if value is None else _numeric(value)


def _text(value: Any) -> Any:
    return value if value is None or type(value) is str else to_json_value(value)


def _document(value: Any) -> Any:
    return None if value is None else hashable(to_json_value(value))


#: Stored (JSON-compatible) value -> canonical value; None = the value is already canonical.
_CANONICAL: dict[KeyKind, Callable[[Any], Any] | None] = {
    KeyKind.INTEGER: _stored_integer, KeyKind.FLOAT: _stored_float, KeyKind.NUMERIC: _stored_numeric,
    KeyKind.BOOL: None, KeyKind.TEXT: _text, KeyKind.DOCUMENT: _document,
}


def coerce(kind: KeyKind, value: Any) -> Any:
    """A request value in the column kind's canonical form; ValueError says what is wrong with it."""
    if value is None:
        return None
    if kind is KeyKind.DOCUMENT:
        return hashable(value)
    if kind is KeyKind.TEXT:
        if isinstance(value, str):
            return value
        raise ValueError("send a string (the value as rows show it)")
    if kind is KeyKind.BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError("send true or false")
    if isinstance(value, bool):
        raise ValueError(f"send a number, not a boolean, for a {kind.value} column")
    if kind is KeyKind.INTEGER:
        return _integer(value)
    if kind is KeyKind.FLOAT:
        return _float(value)
    return _numeric(value)


def _integer(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        raise ValueError("not a whole number")
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError("send a whole number, or a string of digits for integers beyond 2**53")


def _float(value: Any) -> float:
    if isinstance(value, int | float | str):
        with contextlib.suppress(ValueError):
            return float(value)
    raise ValueError("send a number")


def _numeric(value: Any) -> Decimal:
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            pass
    raise ValueError("send a number or a decimal string")


class KeySpec:
    """How to key rows by some columns: canonical keys of stored rows and of requests."""

    __slots__ = ("fields", "kinds", "_canonical", "_single")

    def __init__(self, fields: Sequence[str], kinds: Sequence[KeyKind]) -> None:
        self.fields = tuple(fields)
        self.kinds = tuple(kinds)
        self._canonical = tuple(_CANONICAL[k] for k in self.kinds)
        self._single = len(self.fields) == 1

    @classmethod
    def for_columns(cls, fields: Sequence[str], columns: Mapping[str, ColumnInfo]) -> KeySpec:
        return cls(fields, [kind_of(columns[f]) for f in fields])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeySpec) and (self.fields, self.kinds) == (other.fields, other.kinds)

    def __hash__(self) -> int:
        return hash((self.fields, self.kinds))

    def of_row(self, values: Mapping[str, Any]) -> Key:
        """The canonical key of a stored row; a missing column counts as NULL."""
        if self._single:
            canonical = self._canonical[0]
            value = values.get(self.fields[0])
            return value if canonical is None else canonical(value)
        return tuple(v if c is None else c(v) for v, c in zip([values.get(f) for f in self.fields],
                                                                self._canonical))

    def has_all(self, values: Mapping[str, Any]) -> bool:
        return all(f in values for f in self.fields)

    def components(self, key: Key) -> tuple[Any, ...]:
        return (key,) if self._single else key

    def from_request(self, values: Sequence[Any], what: str) -> Key:
        """Request values (JSON) to a canonical key; InvalidKey names `what` and the offending column."""
        if len(values) != len(self.fields):
            raise InvalidKey(f"{what} has {len(self.fields)} column(s) ({', '.join(self.fields)}); "
                             f"got {len(values)} key value(s): send one value per column, in that order")
        parts = []
        for field, kind, value in zip(self.fields, self.kinds, values):
            try:
                parts.append(coerce(kind, value))
            except ValueError as exc:
                raise InvalidKey(f"{what}: value {value!r} for {kind.value} column {field!r}: {exc}") from None
        return parts[0] if self._single else tuple(parts)

    def to_json(self, key: Key) -> list[Any]:
        """The key's components as JSON values from which from_json() rebuilds the same key."""
        return [_component_json(v) for v in self.components(key)]

    def from_json(self, items: Any) -> Key:
        """Inverse of to_json(); ValueError when the items do not fit this key."""
        if not isinstance(items, list) or len(items) != len(self.fields):
            raise ValueError(f"expected {len(self.fields)} key value(s)")
        parts = [None if v is None else _component_from_json(kind, v) for kind, v in zip(self.kinds, items)]
        return parts[0] if self._single else tuple(parts)


def _component_json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, tuple):
        return [_component_json(v) for v in value]
    return value


def _component_from_json(kind: KeyKind, value: Any) -> Any:
    if kind is KeyKind.DOCUMENT:
        return _tuples(value)
    if kind is KeyKind.INTEGER and not isinstance(value, int):
        raise ValueError("an integer key component is not an integer")
    if kind is KeyKind.TEXT and not isinstance(value, str):
        raise ValueError("a text key component is not a string")
    return coerce(kind, value)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
