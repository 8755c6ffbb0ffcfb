"""Rows as clients see them: protobuf Struct to dict, integer columns back to int, column metadata."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import struct_pb2

from laredo.replication.v1 import replication_pb2 as pb

Row = dict[str, Any]
INTEGER_TYPES = frozenset({"int2", "int4", "int8", "oid", "xid", "smallint", "integer", "bigint"})


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the replicated table, as the server's handshake describes it."""

    name: str
    data_type: str
    not_null: bool = False
    primary_key_ordinal: int = 0  # 1-based position in the primary key; 0 = not part of it

    @classmethod
    def from_proto(cls, definition: pb.ColumnDefinition) -> Column:
        ordinal = definition.primary_key_ordinal or (1 if definition.is_primary_key else 0)
        return cls(definition.column_name, definition.data_type, definition.not_null, ordinal)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "data_type": self.data_type, "not_null": self.not_null,
                "primary_key_ordinal": self.primary_key_ordinal}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Column:
        return cls(str(value["name"]), str(value["data_type"]), bool(value.get("not_null", False)),
                   int(value.get("primary_key_ordinal", 0)))


def primary_key_of(columns: Iterable[Column]) -> tuple[str, ...]:
    keyed = sorted((c for c in columns if c.primary_key_ordinal > 0), key=lambda c: c.primary_key_ordinal)
    return tuple(c.name for c in keyed)


class RowDecoder:
    """Struct to row. Struct numbers are doubles and integers beyond 2**53 travel as decimal strings, so the
    columns the handshake declares as integers are turned back into int."""

    def __init__(self, columns: Iterable[Column] = ()) -> None:
        self.integer_columns = tuple(c.name for c in columns if c.data_type in INTEGER_TYPES)

    def decode(self, struct: struct_pb2.Struct) -> Row:
        row = struct_to_dict(struct)
        for name in self.integer_columns:
            value = row.get(name)
            if isinstance(value, float) and value.is_integer():
                row[name] = int(value)
            elif isinstance(value, str) and value.lstrip("-").isdigit():
                row[name] = int(value)
        return row


def struct_to_dict(struct: struct_pb2.Struct) -> Row:
    """A Struct as plain Python values (a little faster than json_format.MessageToDict)."""
    return {name: _plain(value) for name, value in struct.fields.items()}


def _plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return value.number_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [_plain(item) for item in value.list_value.values]
    return None
