"""ChangeBatch protobuf <-> domain: decode a stream message into typed row changes."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import fields
from functools import lru_cache
from typing import Any

from google.protobuf.message import DecodeError

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, ColumnInfo, RowChange, TableId
from laredo_kernel.errors import ProtocolError
from laredo_kernel.jsonvalue import row_to_json
from laredo_kernel.pgtext import BytesConverter, Converter, bytes_converter_for, convert_text, converter_for
from laredo_kernel.position import Position
from laredo_kernel.tuples import UNCHANGED, RawValue, decode_tuple_exact

_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")

_ACTIONS = {getattr(pb, f"ACTION_{action.name}"): action for action in Action}
ACTION_TO_PROTO = {v: k for k, v in _ACTIONS.items()}
_KINDS = {getattr(pb, f"BATCH_KIND_{kind.name}"): kind for kind in BatchKind}
KIND_TO_PROTO = {v: k for k, v in _KINDS.items()}
#: ColumnInfo's fields, which pb.Column carries under the same names.
_COLUMN_FIELDS = tuple(f.name for f in fields(ColumnInfo))


def columns_to_proto(columns: Iterable[ColumnInfo]) -> list[pb.Column]:
    return [pb.Column(**{name: getattr(c, name) for name in _COLUMN_FIELDS}) for c in columns]


def _column_from_proto(c: pb.Column) -> ColumnInfo:
    return ColumnInfo(**{name: getattr(c, name) for name in _COLUMN_FIELDS})


@lru_cache(maxsize=1024)
def _row_decoder(columns: tuple[ColumnInfo, ...]) -> tuple[tuple[str, Converter], ...]:
    return tuple((c.name, converter_for(c.type_oid, c.type_name, c.base_type_oid)) for c in columns)


def typed_row(columns: tuple[ColumnInfo, ...], raw: Sequence[RawValue], *, key_only: bool = False) -> dict[str, Any]:
    """Raw tuple values (text bytes / None / UNCHANGED) to a typed row keyed by column name.

    With key_only, pgoutput sends NULL for non-key columns: only key columns are kept.
    """
    decoders = _row_decoder(columns)
    if len(raw) != len(decoders):
        raise ProtocolError(f"tuple has {len(raw)} values but the relation has {len(decoders)} columns")
    row: dict[str, Any] = {}
    for (name, convert), value, column in zip(decoders, raw, columns):
        if key_only and not column.is_identity_key:
            continue
        if value is None or value is UNCHANGED:
            row[name] = value
        else:
            row[name] = convert_text(convert, value, name)  # type: ignore[arg-type]
    return row


Plan = tuple[tuple[str, BytesConverter, bool], ...]
#: Every message carries its table's columns, which rarely change: their decoded form and row plan by their
#: wire bytes (a message of one change spent a third of its decoding on them).
_COLUMN_PLANS: dict[tuple[bytes, bool], tuple[tuple[ColumnInfo, ...], Plan]] = {}
_COLUMN_PLANS_KEPT = 1024


def _columns_and_plan(msg: pb.ChangeBatch, json_values: bool) -> tuple[tuple[ColumnInfo, ...], Plan]:
    key = (b"".join([c.SerializeToString() for c in msg.columns]), json_values)
    found = _COLUMN_PLANS.get(key)
    if found is None:
        if len(_COLUMN_PLANS) >= _COLUMN_PLANS_KEPT:
            _COLUMN_PLANS.clear()
        columns = tuple(_column_from_proto(c) for c in msg.columns)
        plan = tuple((c.name, bytes_converter_for(c.type_oid, c.type_name, c.base_type_oid, json_values=json_values),
                      c.is_identity_key) for c in columns)
        found = _COLUMN_PLANS[key] = (columns, plan)
    return found


def _fast_row(plan: Plan, buf: bytes, key_only: bool) -> dict[str, Any]:
    """TupleData bytes straight to a row; raises (any exception) on anything unusual, see _row()."""
    if _INT16.unpack_from(buf, 0)[0] != len(plan):
        raise ValueError("column count")
    pos, row = 2, {}
    for name, convert, is_key in plan:
        kind = buf[pos]
        if kind == 0x74 or kind == 0x62:  # 't' text, 'b' binary (treated alike, as decode_tuple does)
            length = _INT32.unpack_from(buf, pos + 1)[0]
            start = pos + 5
            pos = start + length
            if length < 0:
                raise ValueError("length")
            if not key_only or is_key:
                row[name] = convert(buf[start:pos])
        elif kind == 0x6E or kind == 0x75:  # 'n' NULL, 'u' unchanged TOAST value
            pos += 1
            if not key_only or is_key:
                row[name] = None if kind == 0x6E else UNCHANGED
        else:
            raise ValueError("kind")
    if pos != len(buf):
        raise ValueError("trailing or missing bytes")
    return row


def _row(columns: tuple[ColumnInfo, ...], plan: Plan, buf: bytes, key_only: bool, json_values: bool) -> dict[str, Any]:
    """The fast path, or on any failure the exact one, which raises the precise ProtocolError."""
    try:
        return _fast_row(plan, buf, key_only)
    except Exception:  # noqa: BLE001 - redone below, where errors get their precise message
        row = typed_row(columns, decode_tuple_exact(buf), key_only=key_only)
        return _json_row(row) if json_values else row


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """row_to_json, keeping the UNCHANGED marker."""
    unchanged = [name for name, value in row.items() if value is UNCHANGED]
    out = row_to_json({k: v for k, v in row.items() if v is not UNCHANGED})
    return {name: (UNCHANGED if name in unchanged else out[name]) for name in row}


def decode_batch(data: bytes, *, json_values: bool = False) -> ChangeBatchInfo:
    """Parse one stream message; raises ProtocolError for anything malformed.

    json_values: rows hold the JSON-compatible values laredo_kernel.jsonvalue maps typed values to
    (what clients see), converted straight from the text form; UNCHANGED markers stay.
    """
    try:
        msg = pb.ChangeBatch.FromString(data)
    except DecodeError as exc:
        raise ProtocolError(f"corrupt change batch ({len(data)} bytes): {exc}") from exc
    if msg.kind not in _KINDS:
        raise ProtocolError(f"change batch has unknown kind {msg.kind}")
    columns, plan = _columns_and_plan(msg, json_values)
    lsn, epoch = msg.commit_lsn, msg.epoch
    changes = [_decode_change(columns, plan, lsn, epoch, ch, json_values) for ch in msg.changes]
    return ChangeBatchInfo(
        source_id=msg.source_id,
        kind=_KINDS[msg.kind],
        table=TableId(msg.table.schema, msg.table.name),
        columns=columns,
        commit_lsn=msg.commit_lsn,
        end_lsn=msg.end_lsn,
        xid=msg.xid,
        commit_time_unix_us=msg.commit_time_unix_us,
        chunk=msg.chunk,
        last_chunk=msg.last_chunk,
        changes=changes,
        baseline_id=msg.baseline_id,
        baseline_row_count=msg.baseline_row_count,
        old_columns=tuple(_column_from_proto(c) for c in msg.old_columns),
        reason=msg.reason,
        epoch=epoch,
    )


def _decode_change(columns: tuple[ColumnInfo, ...], plan: Plan, lsn: int, epoch: int, ch: pb.Change,
                   json_values: bool) -> RowChange:
    action = _ACTIONS.get(ch.action)
    if action is None:
        raise ProtocolError(f"change at ordinal {ch.ordinal} has unknown action {ch.action}")
    old_tuple, new_tuple = ch.old_tuple, ch.new_tuple
    old = _row(columns, plan, old_tuple, ch.old_is_key_only, json_values) if old_tuple else None
    new = _row(columns, plan, new_tuple, False, json_values) if new_tuple else None
    if action in (Action.INSERT, Action.UPDATE) and new is None:
        raise ProtocolError(f"{action.value} at ordinal {ch.ordinal} carries no new row")
    if action is Action.DELETE and old is None:
        raise ProtocolError(f"DELETE at ordinal {ch.ordinal} carries no old row or key")
    return RowChange(Position(lsn, ch.ordinal, epoch), action, old, new, ch.old_is_key_only)
