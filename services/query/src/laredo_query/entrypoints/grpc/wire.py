"""Protocol buffers wire format for the few fields the query responses need.

Responses are framed by hand around row Structs serialized once per row version (and shared by every
reader), so a Lookup costs a dictionary lookup and a few byte concatenations instead of building and
serializing a Struct. The generated classes parse the result (tests/unit compares both encodings).
"""

from __future__ import annotations

from laredo_kernel.struct_wire import varint

_LENGTH_DELIMITED = 2
_VARINT = 0


def tag(field_number: int, wire_type: int) -> bytes:
    return varint(field_number << 3 | wire_type)


def message_field(field_number: int, data: bytes) -> bytes:
    """A length-delimited field (sub-message or bytes), present even when empty."""
    return tag(field_number, _LENGTH_DELIMITED) + varint(len(data)) + data


def string_field(field_number: int, text: str) -> bytes:
    """A proto3 string field: omitted when empty."""
    return message_field(field_number, text.encode("utf-8")) if text else b""


def int_field(field_number: int, value: int) -> bytes:
    """A proto3 int32/int64/bool field: omitted when zero."""
    return tag(field_number, _VARINT) + varint(int(value)) if value else b""


def timestamp(unix_us: int) -> bytes:
    """The body of a google.protobuf.Timestamp (seconds = 1, nanos = 2) from Unix microseconds."""
    seconds, micros = divmod(unix_us, 1_000_000)
    return int_field(1, seconds) + int_field(2, micros * 1000)
