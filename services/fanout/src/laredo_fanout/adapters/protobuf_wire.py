"""Protobuf wire encoding by hand for the hot messages: Struct rows and journal entries (read back with the
kernel's decoders, laredo_kernel.sync_wire and struct_wire, which the client library uses too).

Built for JSON-compatible values (laredo_kernel.jsonvalue's output: None, bool, int, float, str, lists and
dicts of those). The bytes parse to the same messages as google.protobuf's own Struct.update() and
ReplicationJournalEntry serialization would give (checked by the unit tests); map entries keep the row's
column order. Wire facts: a length-delimited field is tag, varint length, payload; Value is a oneof of
null_value=1 (varint), number_value=2 (double), string_value=3, bool_value=4, struct_value=5, list_value=6.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from laredo_kernel.struct_wire import StructDecoder
from laredo_kernel.sync_wire import JOURNAL_ENTRY, journal_entry, only_field
from laredo_kernel.sync_wire import snapshot_row as row_span

_DOUBLE = struct.Struct("<d").pack
_ONE_BYTE = [bytes([i]) for i in range(128)]
_NULL, _TRUE, _FALSE = b"\x08\x00", b"\x20\x01", b"\x20\x00"
_NUMBER, _STRING, _STRUCT, _LIST = b"\x11", b"\x1a", b"\x2a", b"\x32"
_ENTRY, _ENTRY_VALUE, _ELEMENT = b"\x0a", b"\x12", b"\x0a"


def varint(value: int) -> bytes:
    if 0 <= value < 128:
        return _ONE_BYTE[value]
    if 0 < value < 16384:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
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
        return _NULL
    kind = type(value)
    if kind is str:
        data = value.encode("utf-8")
        return b"".join((_STRING, varint(len(data)), data))
    if kind is bool:
        return _TRUE if value else _FALSE
    if kind is int or kind is float:
        return _NUMBER + _DOUBLE(value)
    if isinstance(value, Mapping):
        return length_delimited(_STRUCT, struct_fields(value))
    if isinstance(value, (list, tuple)):
        return length_delimited(_LIST, b"".join(length_delimited(_ELEMENT, encode_value(v)) for v in value))
    if isinstance(value, (int, float)):  # subclasses (enums of int, numpy scalars)
        return _NUMBER + _DOUBLE(float(value))
    return encode_value(str(value))


class _Field:
    """The constant bytes of one column name's map entries, computed once per name."""

    __slots__ = ("key_and_tag", "number_prefix", "null_entry", "true_entry", "false_entry")

    def __init__(self, name: str) -> None:
        key = length_delimited(b"\x0a", name.encode("utf-8"))
        self.key_and_tag = key + _ENTRY_VALUE  # MapEntry.key, then the tag of MapEntry.value
        self.number_prefix = _ENTRY + varint(len(key) + 11) + key + b"\x12\x09" + _NUMBER  # + 8 bytes of double
        self.null_entry = self._entry(key, _NULL)
        self.true_entry = self._entry(key, _TRUE)
        self.false_entry = self._entry(key, _FALSE)

    @staticmethod
    def _entry(key: bytes, value: bytes) -> bytes:
        body = key + _ENTRY_VALUE + varint(len(value)) + value
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
            value_size = size + 1 + (1 if size < 128 else len(varint(size)))
            entry_size = len(field.key_and_tag) + value_size + (1 if value_size < 128 else len(varint(value_size)))
            extend((_ENTRY, one[entry_size] if entry_size < 128 else varint(entry_size), field.key_and_tag,
                    one[value_size] if value_size < 128 else varint(value_size), _STRING,
                    one[size] if size < 128 else varint(size), data))
        elif kind is int or kind is float:
            extend((field.number_prefix, _DOUBLE(value)))
        elif value is None:
            parts.append(field.null_entry)
        elif kind is bool:
            parts.append(field.true_entry if value else field.false_entry)
        else:
            encoded = encode_value(value)
            size = len(encoded)
            entry_size = len(field.key_and_tag) + len(varint(size)) + size
            extend((_ENTRY, varint(entry_size), field.key_and_tag, varint(size), encoded))
    return b"".join(parts)


def snapshot_row(values: Mapping[str, Any]) -> bytes:
    """SnapshotRow{row} bytes: field 1 always present, so an empty row is an empty Struct, not a missing one."""
    return length_delimited(b"\x0a", struct_fields(values))


def journal_entry_head(*, sequence: int, position: str, seconds: int, nanos: int, action: str, xid: int) -> bytes:
    """ReplicationJournalEntry fields 1-4 and 100 (the values are appended by the caller as fields 5 and 6)."""
    stamp = _stamps.get((seconds, nanos))
    if stamp is None:  # the changes of one transaction share their commit time
        stamp = (b"\x08" + varint(seconds) if seconds else b"") + (b"\x10" + varint(nanos) if nanos else b"")
        if len(_stamps) > 64:
            _stamps.clear()
        _stamps[(seconds, nanos)] = stamp
    text = position.encode("ascii")  # positions are 'X/Y:N' text
    parts = [b"\x08", varint(sequence)] if sequence else []
    if text:
        parts += (b"\x12", _ONE_BYTE[len(text)] if len(text) < 128 else varint(len(text)), text)
    parts += (b"\x1a", _ONE_BYTE[len(stamp)], stamp)  # a Timestamp is at most 22 bytes
    if action:
        parts.append(_ACTIONS.get(action) or length_delimited(b"\x22", action.encode("utf-8")))
    if xid:
        parts += (b"\xa0\x06", varint(xid))
    return b"".join(parts)


_stamps: dict[tuple[int, int], bytes] = {}
_ACTIONS = {a: length_delimited(b"\x22", a.encode()) for a in ("INSERT", "UPDATE", "DELETE", "TRUNCATE")}


#: Rows read back from their wire form, as the JSON values they were made from.
_ROWS = StructDecoder(whole_numbers=True)


def decode_snapshot_row(encoded: bytes) -> dict[str, Any]:
    """The JSON-compatible values of SnapshotRow{row} bytes (snapshot_row's inverse). Numbers come back as
    ints when whole (jsonvalue makes every int a number and keeps floats), so a float column's 2.0 reads 2:
    the same number, and the same bytes when encoded again."""
    start, end = row_span(encoded, 0, len(encoded))
    return _ROWS.decode(encoded, start, end)


def decode_entry_rows(encoded: bytes) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """The action and the old and new rows' values (None when absent) of a SyncResponse{journal_entry}, read
    with the kernel's decoders (the client library's)."""
    located = only_field(encoded)
    if located is None or located[0] != JOURNAL_ENTRY:
        raise ValueError("not a SyncResponse holding one journal entry")
    _, _, action, old_start, old_end, new_start, new_end = journal_entry(encoded, located[1], located[2])
    return (action.decode(), _ROWS.decode(encoded, old_start, old_end) if old_start >= 0 else None,
            _ROWS.decode(encoded, new_start, new_end) if new_start >= 0 else None)
