"""google.protobuf.Struct and Value bytes to and from plain Python values, by hand (see laredo_kernel.sync_wire
for why): the one Struct encoder and decoder of fan-out's and query's rows and of the client's replicas.

google.protobuf.Struct is `map<string, Value> fields = 1`, each map entry a message {string key = 1; Value
value = 2}; Value is a oneof of null_value = 1 (varint), number_value = 2 (double), string_value = 3,
bool_value = 4, struct_value = 5 (Struct) and list_value = 6 (ListValue {repeated Value values = 1}).
Serializers write each entry as key then value, each once; other valid layouts take a general path, and what
implementations may read differently (a Value holding two kinds, an entry with unknown fields) raises
NotCanonical for the caller to hand to the generated code.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from laredo_kernel.sync_wire import (NotCanonical, WireError, read_length, read_varint, repeated_field_1,
                                     skip_field)

_DOUBLE = struct.Struct("<d").unpack_from
_NULL, _NUMBER, _STRING, _BOOL = 0x08, 0x11, 0x1A, 0x20  # Value field tags
_VALUE_TAGS = frozenset({0x08, 0x11, 0x1A, 0x20, 0x2A, 0x32})
_MAX_NAMES = 4096  # distinct column names (and entry headers) remembered per decoder
_LONG_WAY: Any = object()  # "decode this entry on the general path"


class StructDecoder:
    """Struct bytes to a dict of plain values (None, float, str, bool, dict, list); the values of
    `integer_columns` that are whole numbers, or decimal strings (integers beyond 2**53), become int. With
    `whole_numbers`, every column's whole number becomes int: the JSON values (laredo_kernel.jsonvalue) a
    row's Struct was made from, up to a float column's whole value reading as the same number as an int.

    A canonical map entry is 0x0A size, 0x0A key-length key, 0x12 value-length, the Value's one field tag, its
    payload. Everything up to the payload depends only on the column and the value's kind and length, so it is
    checked once and remembered: the entry's header bytes map to (name, kind, entry size, payload offset,
    integer column?), and a row of strings, numbers, NULLs and booleans decodes with one lookup per column.
    Not thread-safe beyond what the GIL gives: its caches may be cleared or refilled concurrently, never wrong.
    """

    __slots__ = ("integer_columns", "whole_numbers", "_names", "_headers")

    def __init__(self, integer_columns: frozenset[str] = frozenset(), *, whole_numbers: bool = False) -> None:
        self.integer_columns = integer_columns
        self.whole_numbers = whole_numbers
        self._names: dict[bytes, str] = {}
        self._headers: dict[bytes, tuple[str, int, int, int, bool]] = {}

    def _name(self, raw: bytes) -> str:
        names = self._names
        name = names.get(raw)
        if name is None:
            if len(names) >= _MAX_NAMES:
                names.clear()
            name = names[raw] = raw.decode()
        return name

    def decode(self, data: bytes, pos: int, end: int) -> dict[str, Any]:
        """The Struct in data[pos:end]."""
        row: dict[str, Any] = {}
        headers = self._headers
        while pos < end:
            info = headers.get(data[pos:pos + 7 + data[pos + 3]]) if pos + 3 < end else None
            if info is None:
                if not self._learn(data, pos, end):
                    pos = self._entry(data, pos, end, row, None)
                continue
            name, kind, size, offset, integer = info
            stop = pos + size
            if stop > end:
                raise WireError(f"a Struct entry of {size} bytes at byte {pos} runs past the Struct's end ({end})")
            at = pos + offset
            if kind == _STRING:
                if data[at] != size - offset - 1:  # the Value holds more than its string: take the long way
                    pos = self._entry(data, pos, end, row, None)
                    continue
                value: Any = data[at + 1:stop].decode()
                if integer and is_integer_text(value):
                    value = int(value)
            elif kind == _NUMBER:
                value = _DOUBLE(data, at)[0]
                if integer and value.is_integer():
                    value = int(value)
            elif kind == _BOOL:
                value = data[at] != 0
            else:
                value = None
            row[name] = value
            pos = stop
        if pos != end:
            raise WireError(f"a Struct's last field runs past its end ({end})")
        return row

    def fields(self, data: bytes, pos: int, end: int, names: frozenset[str]) -> dict[str, Any]:
        """Just the fields `names` of the Struct in data[pos:end], the others skipped undecoded. Stops once
        every one was found: map keys are unique in what serializers write, so the rest cannot change them."""
        row: dict[str, Any] = {}
        headers, wanted = self._headers, len(names)
        while pos < end and len(row) < wanted:
            info = headers.get(data[pos:pos + 7 + data[pos + 3]]) if pos + 3 < end else None
            if info is None and self._learn(data, pos, end):
                continue
            if info is None or info[0] in names:
                value = _LONG_WAY if info is None else _fast_value(data, pos, end, info)
                if value is _LONG_WAY:
                    pos = self._entry(data, pos, end, row, names)
                    continue
                row[info[0]] = value
            pos += info[2]
        if pos > end:
            raise WireError(f"a Struct's last field runs past its end ({end})")
        return row

    def _learn(self, data: bytes, pos: int, end: int) -> bool:
        """Remember the header of the canonical entry at `pos` (False: not canonical, or too long for the
        one-byte lengths of the fast path)."""
        if pos + 3 >= end or data[pos] != 0x0A or data[pos + 2] != 0x0A:
            return False
        size, key_size = data[pos + 1], data[pos + 3]
        offset = 7 + key_size
        if size >= 0x80 or key_size >= 0x80 or offset > size + 2 or pos + size + 2 > end:
            return False
        key_stop = pos + 4 + key_size
        value_size, kind = data[key_stop + 1], data[key_stop + 2]
        if data[key_stop] != 0x12 or value_size != size - key_size - 4:
            return False
        if not ((kind == _STRING and value_size >= 2) or (kind == _NUMBER and value_size == 9)
                or ((kind == _NULL or kind == _BOOL) and value_size == 2)):
            return False
        headers = self._headers
        if len(headers) >= _MAX_NAMES:
            headers.clear()
        name = self._name(data[pos + 4:key_stop])
        integer = name in self.integer_columns or (self.whole_numbers and kind == _NUMBER)
        headers[data[pos:pos + offset]] = (name, kind, size + 2, offset, integer)
        return True

    def _entry(self, data: bytes, pos: int, end: int, row: dict[str, Any], only: frozenset[str] | None) -> int:
        """Any map entry (fields in any order, unknown fields, long lengths); returns the position after it."""
        if data[pos] != 0x0A:
            return skip_field(data, pos, end)
        start, stop = read_length(data, pos + 1, end)
        raw, value_span = b"", None
        pos = start
        while pos < stop:
            tag = data[pos]
            if tag == 0x0A:
                key_start, pos = read_length(data, pos + 1, stop)
                raw = data[key_start:pos]
            elif tag == 0x12:
                if value_span is not None:
                    raise NotCanonical("a Struct entry's value occurs twice")
                value_span = read_length(data, pos + 1, stop)
                pos = value_span[1]
            else:  # implementations differ on such an entry (upb drops it): the generated code decides
                raise NotCanonical("a Struct entry holds an unknown field")
        name = self._name(raw)
        if only is None or name in only:
            value = decode_value(data, *value_span) if value_span is not None else None
            if name in self.integer_columns:
                value = to_integer(value)
            elif self.whole_numbers and type(value) is float and value.is_integer():
                value = int(value)
            row[name] = value
        return stop


def _fast_value(data: bytes, pos: int, end: int, info: tuple[str, int, int, int, bool]) -> Any:
    """The value of the canonical entry at `pos` whose header is `info`; _LONG_WAY when it is not plain."""
    _, kind, size, offset, integer = info
    stop, at = pos + size, pos + offset
    if stop > end:
        raise WireError(f"a Struct entry of {size} bytes at byte {pos} runs past the Struct's end ({end})")
    if kind == _STRING:
        if data[at] != size - offset - 1:
            return _LONG_WAY
        value: Any = data[at + 1:stop].decode()
        return int(value) if integer and is_integer_text(value) else value
    if kind == _NUMBER:
        value = _DOUBLE(data, at)[0]
        return int(value) if integer and value.is_integer() else value
    return data[at] != 0 if kind == _BOOL else None


def is_integer_text(text: str) -> bool:
    """An optional minus and decimal digits: what int() reads back (isdigit() would take '²', which it cannot)."""
    return (text[1:] if text[:1] == "-" else text).isdecimal()


def to_integer(value: Any) -> Any:
    """An integer column's value: a whole number or a decimal string as int, an integer array's elements
    likewise (nested lists too), anything else as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and is_integer_text(value):
        return int(value)
    if isinstance(value, list):
        return [to_integer(v) for v in value]
    return value


def decode_value(data: bytes, pos: int, end: int) -> Any:
    """The google.protobuf.Value in data[pos:end] as a plain value; no kind set reads as None."""
    value: Any = None
    seen = False
    while pos < end:
        tag = data[pos]
        if seen and tag in _VALUE_TAGS:
            raise NotCanonical("a Value holds more than one field")
        seen = seen or tag in _VALUE_TAGS
        if tag == 0x08:  # null_value
            _, pos = read_varint(data, pos + 1)
            value = None
        elif tag == 0x11:  # number_value
            value = _DOUBLE(data, pos + 1)[0]
            pos += 9
        elif tag == 0x1A:  # string_value
            start, pos = read_length(data, pos + 1, end)
            value = data[start:pos].decode()
        elif tag == 0x20:  # bool_value
            flag, pos = read_varint(data, pos + 1)
            value = flag != 0
        elif tag == 0x2A:  # struct_value
            start, pos = read_length(data, pos + 1, end)
            value = StructDecoder().decode(data, start, pos)  # no integer columns inside JSON values
        elif tag == 0x32:  # list_value
            start, pos = read_length(data, pos + 1, end)
            value = repeated_field_1(data, start, pos, decode_value)  # ListValue {repeated Value values = 1}
        else:
            pos = skip_field(data, pos, end)
    if pos != end:
        raise WireError(f"a Value's last field runs past its end ({end})")
    return value


# Encoding: JSON-compatible values (laredo_kernel.jsonvalue's output: None, bool, int, float, str, lists and dicts
# of those) to the bytes google.protobuf's own Struct.update() serialization gives (checked by the unit tests);
# map entries keep the row's column order, so equal rows are equal bytes.

_PACK_DOUBLE = struct.Struct("<d").pack
SMALL_VARINTS = _ONE_BYTE = [bytes([i]) for i in range(128)]  # varint(i) for i < 128
_NULL_VALUE, _TRUE, _FALSE = b"\x08\x00", b"\x20\x01", b"\x20\x00"
_NUMBER_TAG, _STRING_TAG, _STRUCT_TAG, _LIST_TAG = b"\x11", b"\x1a", b"\x2a", b"\x32"
_ENTRY, _ENTRY_VALUE, _ELEMENT = b"\x0a", b"\x12", b"\x0a"


def varint(value: int) -> bytes:
    """Base-128 varint; a negative int64 takes ten bytes (two's complement), as protobuf writes it."""
    if value < 128:
        if value >= 0:
            return _ONE_BYTE[value]
    elif value < 16384:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    elif value < 2097152:  # journal sequences, row counts
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value < 0:
        value += 1 << 64  # int64 two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(tag: bytes, payload: bytes) -> bytes:
    return b"".join((tag, varint(len(payload)), payload))


def encode_value(value: Any) -> bytes:
    """One google.protobuf.Value."""
    if value is None:
        return _NULL_VALUE
    kind = type(value)
    if kind is str:
        data = value.encode("utf-8")
        return b"".join((_STRING_TAG, varint(len(data)), data))
    if kind is bool:
        return _TRUE if value else _FALSE
    if kind is int or kind is float:
        return _NUMBER_TAG + _PACK_DOUBLE(value)
    if isinstance(value, Mapping):
        return length_delimited(_STRUCT_TAG, struct_fields(value))
    if isinstance(value, (list, tuple)):
        return length_delimited(_LIST_TAG, b"".join(length_delimited(_ELEMENT, encode_value(v)) for v in value))
    if isinstance(value, (int, float)):  # subclasses (enums of int, numpy scalars)
        return _NUMBER_TAG + _PACK_DOUBLE(float(value))
    return encode_value(str(value))


#: Strings shorter than this get their entry's bytes before the text from a per-column table.
_SHORT_STRING = 96


class _Field:
    """The constant bytes of one column name's map entries, computed once per name."""

    __slots__ = ("key_and_tag", "number_prefix", "null_entry", "true_entry", "false_entry", "string_prefixes")

    def __init__(self, name: str) -> None:
        key = length_delimited(b"\x0a", name.encode("utf-8"))
        self.key_and_tag = key + _ENTRY_VALUE  # MapEntry.key, then the tag of MapEntry.value
        self.number_prefix = _ENTRY + varint(len(key) + 11) + key + b"\x12\x09" + _NUMBER_TAG  # + 8 bytes of double
        self.null_entry, self.true_entry, self.false_entry = map(self.entry, (_NULL_VALUE, _TRUE, _FALSE))
        #: for a string of n UTF-8 bytes (n < _SHORT_STRING): everything of its entry before the text, made when
        #: first needed
        self.string_prefixes: list[bytes | None] = [None] * _SHORT_STRING

    def string_prefix(self, size: int) -> bytes:
        value = _STRING_TAG + varint(size)
        value_size = len(value) + size
        prefix = self.string_prefixes[size] = b"".join((
            _ENTRY, varint(len(self.key_and_tag) + len(varint(value_size)) + value_size), self.key_and_tag,
            varint(value_size), value))
        return prefix

    def entry(self, value: bytes) -> bytes:
        """The whole map entry of this column holding the encoded Value `value`."""
        body = self.key_and_tag + varint(len(value)) + value
        return _ENTRY + varint(len(body)) + body


_fields: dict[str, _Field] = {}


def _field(name: str) -> _Field:
    field = _fields.get(name)
    if field is None:
        field = _fields[name] = _Field(name)
    return field


def struct_fields(values: Mapping[str, Any]) -> bytes:
    """The payload of a google.protobuf.Struct: one map entry {key, value} per item.

    Strings, numbers, NULLs and booleans (nearly every value) take a path without function calls.
    """
    parts: list[bytes] = []
    extend = parts.extend
    fields = _fields
    one = _ONE_BYTE
    for name, value in values.items():
        field = fields.get(name) or _field(name)
        kind = type(value)
        if kind is str:
            data = value.encode("utf-8")
            size = len(data)
            if size < _SHORT_STRING:
                extend((field.string_prefixes[size] or field.string_prefix(size), data))
                continue
            value_size = size + 1 + (1 if size < 128 else len(varint(size)))
            entry_size = len(field.key_and_tag) + value_size + (1 if value_size < 128 else len(varint(value_size)))
            extend((_ENTRY, one[entry_size] if entry_size < 128 else varint(entry_size), field.key_and_tag,
                    one[value_size] if value_size < 128 else varint(value_size), _STRING_TAG,
                    one[size] if size < 128 else varint(size), data))
        elif kind is int or kind is float:
            extend((field.number_prefix, _PACK_DOUBLE(value)))
        elif value is None:
            parts.append(field.null_entry)
        elif kind is bool:
            parts.append(field.true_entry if value else field.false_entry)
        else:
            parts.append(field.entry(encode_value(value)))
    return b"".join(parts)


#: The decoder of rows made by struct_fields: JSON-compatible values back, whole numbers as int (jsonvalue makes
#: every int a number and keeps floats, so a float column's 2.0 reads 2: the same number, the same bytes again).
ROW_VALUES = StructDecoder(whole_numbers=True)
