"""Protobuf messages as the JSON `--json` prints: stable field names and types that scripts can rely on.

Rules (documented in the README): every field is present under its proto name (unset sub-messages are
null; of a oneof only the member that is set); enums by name (`PIPELINE_STATE_STREAMING`); 64-bit integers
as JSON numbers, not strings; Timestamps as RFC 3339 UTC strings; Durations as seconds (a number);
Struct rows as JSON objects with sorted keys, whole numbers as integers (Struct carries every number as a
double; integers beyond 2**53 arrive as strings from the server and stay strings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_EXACT_FLOAT_LIMIT = 2**53


def message_to_json(message: Message) -> dict[str, Any]:
    """The message as a JSON object following the module's rules."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.containing_oneof is not None and not message.HasField(field.name):
            continue
        value = getattr(message, field.name)
        if field.is_repeated:
            out[field.name] = [_field_value(field, item) for item in value]
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _field_value(field, value)
    return out


def _field_value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        described = field.enum_type.values_by_number.get(value)
        return described.name if described is not None else value
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return well_known_or_message(value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return value.hex()
    return value


def well_known_or_message(message: Message) -> Any:
    return _WELL_KNOWN.get(message.DESCRIPTOR.full_name, message_to_json)(message)


def timestamp_text(stamp: timestamp_pb2.Timestamp) -> str:
    """RFC 3339 in UTC with `Z`, with as many fractional digits as the value needs (0, 3, 6 or 9)."""
    return stamp.ToJsonString()


def duration_seconds(duration: duration_pb2.Duration) -> float | int:
    nanos = duration.seconds * 1_000_000_000 + duration.nanos
    return nanos // 1_000_000_000 if nanos % 1_000_000_000 == 0 else nanos / 1e9


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A row: keys sorted (Struct keeps no column order), numbers normalized by `number`."""
    return {key: value_to_python(struct.fields[key]) for key in sorted(struct.fields)}


def value_to_python(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return number(value.number_value)
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [value_to_python(v) for v in value.list_value.values]
    return None  # null_value, or no kind set


_WELL_KNOWN: dict[str, Callable[[Any], Any]] = {
    timestamp_pb2.Timestamp.DESCRIPTOR.full_name: timestamp_text,
    duration_pb2.Duration.DESCRIPTOR.full_name: duration_seconds,
    struct_pb2.Struct.DESCRIPTOR.full_name: struct_to_dict,
    struct_pb2.Value.DESCRIPTOR.full_name: value_to_python,
    struct_pb2.ListValue.DESCRIPTOR.full_name: lambda message: [value_to_python(v) for v in message.values],
}


def number(value: float) -> float | int:
    """A whole double within the exactly representable range as int (7.0 -> 7); anything else unchanged."""
    if math.isfinite(value) and value.is_integer() and abs(value) <= _EXACT_FLOAT_LIMIT:
        return int(value)
    return value


def python_to_value(value: Any) -> struct_pb2.Value:
    """A JSON value (from json.loads or a plain string) as google.protobuf.Value."""
    message = struct_pb2.Value()
    if value is None:
        message.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, int) and abs(value) > _EXACT_FLOAT_LIMIT:
        message.string_value = str(value)  # a double would round it; the server reads decimal strings
    elif isinstance(value, int | float):
        message.number_value = float(value)
    elif isinstance(value, str):
        message.string_value = value
    elif isinstance(value, Mapping):
        message.struct_value.update(dict(value))
    elif isinstance(value, list | tuple):
        message.list_value.extend(list(value))
    else:
        raise TypeError(f"cannot send {value!r} as a JSON value")
    return message
