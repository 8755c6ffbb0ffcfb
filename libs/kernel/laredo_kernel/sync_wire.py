"""Protobuf wire decoding by hand for the hot Sync messages: where the journal entries and snapshot rows of a
SyncResponse lie in its bytes (their Struct rows are decoded by laredo_kernel.struct_wire).

Why by hand: going through generated messages costs a Python object per entry, Struct, map entry and Value,
which made decoding most of a client's CPU; walking the bytes with indexes allocates little beyond the values.

Wire facts (fixed by the protobuf encoding specification): a field is a varint key (field number << 3 | wire
type) then its value: wire type 0 a varint, 1 eight bytes, 2 a varint length and that many bytes, 5 four bytes;
a message's fields may come in any order, unknown ones are skipped, and for a scalar seen twice the last wins.

The decoders read what serializers write on a straight-line path and any other valid layout on a general one.
A message field that occurs twice must be merged, which only the generated code does: such bytes raise
NotCanonical before anything was applied, and the caller parses them with the generated code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_INT64_WRAP = 1 << 64
_INT64_MAX = (1 << 63) - 1
_ENTRY_LENGTH_TAGS = frozenset({0x12, 0x1A, 0x22, 0x2A, 0x32})  # ReplicationJournalEntry fields 2-6

#: One journal entry, located in its message's bytes: (sequence, source_position, action, old_start, old_end,
#: new_start, new_end); a missing old or new Struct has start -1, `action` is the action's UTF-8 bytes.
EntrySpan = tuple[int, str, bytes, int, int, int, int]
#: Where one Struct row lies in its message's bytes: (start, end).
RowSpan = tuple[int, int]


class WireError(ValueError):
    """The bytes are not a valid encoding of the message they should hold."""


class NotCanonical(Exception):
    """Valid bytes these decoders do not take (a message field split over several occurrences)."""


# -- primitives ---------------------------------------------------------------------------------------------

def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"varint at byte {pos} is longer than ten bytes")


def read_length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length prefix at `pos`: (payload start, payload end), checked to lie within `end`."""
    size = data[pos]
    if size < 0x80:
        pos += 1
    elif data[pos + 1] < 0x80:
        size = (size & 0x7F) | data[pos + 1] << 7
        pos += 2
    else:
        size, pos = read_varint(data, pos)
    stop = pos + size
    if stop > end:
        raise WireError(f"a field of {size} bytes at byte {pos} runs past its message's end ({end})")
    return pos, stop


def skip_field(data: bytes, pos: int, end: int) -> int:
    """The position after the field whose key starts at `pos`."""
    key, pos = read_varint(data, pos)
    wire_type = key & 7
    if wire_type == 0:
        _, pos = read_varint(data, pos)
    elif wire_type == 1:
        pos += 8
    elif wire_type == 2:
        pos = read_length(data, pos, end)[1]
    elif wire_type == 5:
        pos += 4
    else:
        raise WireError(f"field {key >> 3} at byte {pos} has wire type {wire_type}, which proto3 never writes")
    if pos > end:
        raise WireError(f"field {key >> 3} runs past its message's end ({end})")
    return pos


def only_field(data: bytes) -> tuple[int, int, int] | None:
    """(field number, payload start, payload end) when `data` is a message holding exactly one field and that
    field is length-delimited; None otherwise (the caller then parses the message in full)."""
    end = len(data)
    if not end:
        return None
    key, pos = read_varint(data, 0)
    if key & 7 != 2:
        return None
    start, stop = read_length(data, pos, end)
    return (key >> 3, start, stop) if stop == end else None


# -- sync messages ------------------------------------------------------------------------------------------

def journal_entry(data: bytes, pos: int, end: int) -> EntrySpan:
    """The fields of the ReplicationJournalEntry in data[pos:end] the client uses.

    Straight-line for what servers write: sequence, source_position, timestamp, action, old_values, new_values
    and xid before or after the two rows (number order, or as the fan-out writes it), the text fields and the
    timestamp under 128 bytes; anything else (other orders, unknown fields) goes through the general loop.
    The straight line may peek past `end` (the position only grows, and must land on `end` exactly, or the
    general loop decides) and past the buffer (IndexError: the general loop decides)."""
    try:
        if data[pos] == 0x08:
            low = data[pos + 1]
            if low < 0x80:
                sequence, at = low, pos + 2
            elif data[pos + 2] < 0x80:
                sequence, at = (low & 0x7F) | data[pos + 2] << 7, pos + 3
            elif data[pos + 3] < 0x80:
                sequence, at = (low & 0x7F) | (data[pos + 2] & 0x7F) << 7 | data[pos + 3] << 14, pos + 4
            else:
                sequence, at = read_varint(data, pos + 1)
            if data[at] == 0x12 and data[at + 1] < 0x80 and sequence <= _INT64_MAX:
                start, at = at + 2, at + 2 + data[at + 1]
                position = data[start:at].decode()
                if data[at] == 0x1A and data[at + 1] < 0x80:  # timestamp, skipped
                    at += 2 + data[at + 1]
                if data[at] == 0x22 and data[at + 1] < 0x80:
                    start, at = at + 2, at + 2 + data[at + 1]
                    action = data[start:at]
                    if data[at] == 0xA0 and data[at + 1] == 0x06:  # xid, skipped
                        at += 2
                        while data[at] >= 0x80:
                            at += 1
                        at += 1
                    old_start = old_end = new_start = new_end = -1
                    if at < end and data[at] == 0x2A:
                        size = data[at + 1]
                        if size < 0x80:
                            old_start = at + 2
                        elif data[at + 2] < 0x80:
                            size, old_start = (size & 0x7F) | data[at + 2] << 7, at + 3
                        else:
                            size, old_start = read_varint(data, at + 1)
                        at = old_end = old_start + size
                    if at < end and data[at] == 0x32:
                        size = data[at + 1]
                        if size < 0x80:
                            new_start = at + 2
                        elif data[at + 2] < 0x80:
                            size, new_start = (size & 0x7F) | data[at + 2] << 7, at + 3
                        else:
                            size, new_start = read_varint(data, at + 1)
                        at = new_end = new_start + size
                    if at < end and data[at] == 0xA0:
                        at = _after_xid(data, at)
                    if at == end:
                        return sequence, position, action, old_start, old_end, new_start, new_end
    except (IndexError, UnicodeDecodeError):
        pass
    return _journal_entry_any(data, pos, end)


def _after_xid(data: bytes, pos: int) -> int:
    """The position after an xid field (key 0xA0 0x06, a varint); `pos` unchanged if it is something else."""
    if data[pos + 1] != 0x06:
        return pos
    pos += 2
    while data[pos] >= 0x80:
        pos += 1
    return pos + 1


def _journal_entry_any(data: bytes, pos: int, end: int) -> EntrySpan:
    """journal_entry for any field order and any lengths."""
    sequence, position, action = 0, "", b""
    old_start = old_end = new_start = new_end = -1
    while pos < end:
        tag = data[pos]
        if tag in _ENTRY_LENGTH_TAGS:  # source_position, timestamp, action, old_values, new_values
            start = pos + 2
            size = data[pos + 1]
            if size >= 0x80:  # a Struct of 128 bytes or more: mostly a two-byte length
                high = data[pos + 2]
                if high < 0x80:
                    size, start = (size & 0x7F) | high << 7, pos + 3
                else:
                    size, start = read_varint(data, pos + 1)
            pos = start + size
            if pos > end:
                raise WireError(f"a journal entry field of {size} bytes runs past the entry's end ({end})")
            if tag == 0x12:
                position = data[start:pos].decode()
            elif tag == 0x22:
                action = data[start:pos]
            elif tag == 0x2A:
                if old_start >= 0:
                    raise NotCanonical("old_values occurs twice")
                old_start, old_end = start, pos
            elif tag == 0x32:
                if new_start >= 0:
                    raise NotCanonical("new_values occurs twice")
                new_start, new_end = start, pos
        elif tag == 0x08:  # sequence
            sequence, pos = read_varint(data, pos + 1)
            if sequence > _INT64_MAX:
                sequence -= _INT64_WRAP
        elif tag == 0xA0 and data[pos + 1] == 0x06:  # xid, skipped
            pos = _after_xid(data, pos)
        else:  # fields this client does not know
            pos = skip_field(data, pos, end)
    if pos != end:
        raise WireError(f"a journal entry's last field runs past its end ({end})")
    return sequence, position, action, old_start, old_end, new_start, new_end


def repeated_field_1(data: bytes, pos: int, end: int, parse: Callable[[bytes, int, int], T]) -> list[T]:
    """`parse(data, start, end)` of each occurrence of the length-delimited field 1 of the message in
    data[pos:end] (a repeated message field), other fields skipped."""
    values: list[T] = []
    append = values.append
    while pos < end:
        if data[pos] != 0x0A:
            pos = skip_field(data, pos, end)
            continue
        start, pos = read_length(data, pos + 1, end)
        append(parse(data, start, pos))
    return values


def snapshot_row(data: bytes, pos: int, end: int) -> RowSpan:
    """The (start, end) of the row Struct of the SnapshotRow in data[pos:end]; an absent row is empty."""
    row: RowSpan | None = None
    while pos < end:
        if data[pos] != 0x0A:
            pos = skip_field(data, pos, end)
            continue
        if row is not None:
            raise NotCanonical("SnapshotRow.row occurs twice")
        row = read_length(data, pos + 1, end)
        pos = row[1]
    return row if row is not None else (end, end)


#: SyncResponse fields whose bytes the client decodes itself: snapshot_row, journal_entry, snapshot_rows and
#: journal_batch; every other message goes through the generated code.
SNAPSHOT_ROW, JOURNAL_ENTRY, SNAPSHOT_ROWS, JOURNAL_BATCH = 3, 5, 100, 101


def sync_payload(data: bytes) -> tuple[list[EntrySpan] | None, list[RowSpan] | None] | None:
    """(journal entries, None) or (None, snapshot rows) located in a SyncResponse's bytes; None when the message
    holds something else (a handshake, a heartbeat...) or more than one field."""
    found = only_field(data)
    if found is None:
        return None
    number, start, end = found
    if number == JOURNAL_BATCH:  # a JournalEntryBatch
        return repeated_field_1(data, start, end, journal_entry), None
    if number == JOURNAL_ENTRY:
        return [journal_entry(data, start, end)], None
    if number == SNAPSHOT_ROWS:  # a SnapshotRowBatch
        return None, repeated_field_1(data, start, end, snapshot_row)
    if number == SNAPSHOT_ROW:
        return None, [snapshot_row(data, start, end)]
    return None
