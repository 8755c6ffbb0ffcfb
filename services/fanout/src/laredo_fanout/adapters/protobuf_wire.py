"""Protobuf wire encoding by hand for the hot messages: rows (laredo_kernel.struct_wire's Struct encoder) and journal
entries, read back with the kernel's decoders (laredo_kernel.sync_wire and struct_wire, the client library's). Built
for JSON-compatible values (laredo_kernel.jsonvalue's output); the bytes parse to the same messages as
google.protobuf's own serialization gives (checked by the unit tests), map entries in the row's column order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from laredo_kernel.changes import Action
from laredo_kernel.struct_wire import ROW_VALUES, SMALL_VARINTS, length_delimited, struct_fields, varint
from laredo_kernel.sync_wire import JOURNAL_ENTRY, journal_entry, only_field
from laredo_kernel.sync_wire import snapshot_row as row_span

from laredo_fanout.domain.journal import EntryRows


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
        parts += (b"\x12", SMALL_VARINTS[len(text)] if len(text) < 128 else varint(len(text)), text)
    parts += (b"\x1a", SMALL_VARINTS[len(stamp)], stamp)  # a Timestamp is at most 22 bytes
    if action:
        parts.append(_ACTIONS.get(action) or length_delimited(b"\x22", action.encode("utf-8")))
    if xid:
        parts += (b"\xa0\x06", varint(xid))
    return b"".join(parts)


_stamps: dict[tuple[int, int], bytes] = {}
_ACTIONS = {a: length_delimited(b"\x22", a.encode()) for a in ("INSERT", "UPDATE", "DELETE", "TRUNCATE")}


def decode_snapshot_row(encoded: bytes) -> dict[str, Any]:
    """The JSON-compatible values of SnapshotRow{row} bytes (snapshot_row's inverse; see ROW_VALUES)."""
    start, end = row_span(encoded, 0, len(encoded))
    return ROW_VALUES.decode(encoded, start, end)


def decode_entry_rows(encoded: bytes) -> EntryRows:
    """The action and the old and new rows' values (None when absent) of a SyncResponse{journal_entry}, read
    with the kernel's decoders (the client library's)."""
    located = only_field(encoded)
    if located is None or located[0] != JOURNAL_ENTRY:
        raise ValueError("not a SyncResponse holding one journal entry")
    _, _, action, old_start, old_end, new_start, new_end = journal_entry(encoded, located[1], located[2])
    decode = ROW_VALUES.decode
    return EntryRows(Action(action.decode()), decode(encoded, old_start, old_end) if old_start >= 0 else None,
                     decode(encoded, new_start, new_end) if new_start >= 0 else None)
