"""Protobuf <-> application types for the Query service; responses as pre-framed bytes (see wire.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf import struct_pb2

from laredo_kernel.changes import Action

from laredo_query.application.queries import RowPage
from laredo_query.domain.errors import InvalidRequest
from laredo_query.domain.events import ChangeEvent
from laredo_query.domain.row_store import StoredRow
from laredo_query.entrypoints.grpc import wire

_FOUND = wire.int_field(1, 1)


def key_values(values: Sequence[struct_pb2.Value], field: str) -> list[Any]:
    """google.protobuf.Value list -> JSON values (numbers arrive as floats; the domain coerces them)."""
    return [python_value(v, f"{field}[{i}]") for i, v in enumerate(values)]


def python_value(value: struct_pb2.Value, where: str) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "null_value":
        return None
    if kind == "list_value":
        return [python_value(v, where) for v in value.list_value.values]
    if kind == "struct_value":
        return {k: python_value(v, where) for k, v in value.struct_value.fields.items()}
    raise InvalidRequest(f"{where} has no value set: set number_value, string_value, bool_value, "
                         "null_value, list_value or struct_value")


def found_row(row: StoredRow | None) -> bytes:
    """LookupResponse / GetRowResponse: found = 1, row = 2."""
    return b"" if row is None else _FOUND + wire.message_field(2, row.encoded)  # the row's Struct, as held


def rows(rows: Iterable[StoredRow]) -> bytes:
    """LookupAllResponse: rows = 1."""
    return b"".join(wire.message_field(1, r.encoded) for r in rows)


def row_page(page: RowPage) -> bytes:
    """ListRowsResponse: rows = 1, next_page_token = 2, total_count = 3."""
    return rows(page.rows) + wire.string_field(2, page.next_page_token) + wire.int_field(3, page.total_count)


def count(value: int) -> bytes:
    """CountRowsResponse: count = 1."""
    return wire.int_field(1, value)


def change_event(event: ChangeEvent) -> bytes:
    """SubscribeResponse of a live change; serialized once and shared by every subscriber."""
    data = event.wire
    if data is None:
        data = event.wire = _subscribe_response(event.action, str(event.position or ""), event.xid,
                                                event.commit_time_unix_us, event.old, event.new)
    return data


def replayed_row(row: StoredRow, now_unix_us: int) -> bytes:
    """SubscribeResponse replaying an existing row as an INSERT; position = the change that wrote it."""
    return _subscribe_response(Action.INSERT, str(row.position or ""), 0, now_unix_us, None, row)


def _subscribe_response(action: Action, position: str, xid: int, unix_us: int, old: StoredRow | None,
                        new: StoredRow | None) -> bytes:
    """action = 1, position = 2, xid = 3, timestamp = 4, old_values = 5, new_values = 6."""
    parts = [wire.string_field(1, action.value), wire.string_field(2, position), wire.int_field(3, xid),
             wire.message_field(4, wire.timestamp(unix_us))]
    if old is not None:
        parts.append(wire.message_field(5, old.encoded))
    if new is not None:
        parts.append(wire.message_field(6, new.encoded))
    return b"".join(parts)
