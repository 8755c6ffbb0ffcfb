"""SyncResponse bytes built once and shared: rows and journal entries are framed from cached bytes.

Wire facts this relies on (protobuf encoding, stable by specification):
- a length-delimited field is tag, varint length, payload; the tags of fields 1-15 are one byte;
- a message's fields may appear in any order, and a repeated message field is the concatenation
  of its elements, each framed as above;
- so the bytes of SnapshotRow{row} (tag 0x0A) become ReplicationJournalEntry.old_values (0x2A) or
  new_values (0x32) by swapping the first byte, and one SyncResponse{journal_entry} (0x2A) becomes
  an element of JournalEntryBatch.entries (0x0A) the same way; only batch wrappers are new bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from laredo.replication.v1 import replication_pb2 as pb
from laredo_kernel.changes import Action, ColumnInfo

from laredo_fanout.adapters import protobuf_wire
from laredo_fanout.adapters.protobuf_wire import varint
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.sync_plan import SyncMode, SyncPlan
from laredo_fanout.domain.table_state import StoredRow

_OLD_VALUES, _NEW_VALUES = b"\x2a", b"\x32"  # ReplicationJournalEntry fields 5 and 6
_REPEATED_ELEMENT = b"\x0a"  # field 1 of SnapshotRowBatch / JournalEntryBatch
_SNAPSHOT_ROW = b"\x1a"  # SyncResponse field 3
_JOURNAL_ENTRY = b"\x2a"  # SyncResponse field 5
_SNAPSHOT_ROWS = b"\xa2\x06"  # SyncResponse field 100, length-delimited
_JOURNAL_BATCH = b"\xaa\x06"  # SyncResponse field 101, length-delimited
_FETCH_ROW = b"\x12"  # FetchSnapshotResponse field 2
_MODES = {
    SyncMode.FULL_SNAPSHOT: pb.SYNC_MODE_FULL_SNAPSHOT,
    SyncMode.DELTA: pb.SYNC_MODE_DELTA,
    SyncMode.DELTA_FROM_SNAPSHOT: pb.SYNC_MODE_DELTA_FROM_SNAPSHOT,
}


def _reframed(encoded: bytes, tag: bytes) -> list[Any]:
    """A single-byte-tag field's bytes under another single-byte tag, without copying the payload."""
    return [tag, memoryview(encoded)[1:]]


class ProtobufSyncEncoder:
    """The SyncEncoder port for the laredo.replication.v1 wire format."""

    encode_row = staticmethod(protobuf_wire.snapshot_row)  # always starts with the tag of field 1
    decode_row = staticmethod(protobuf_wire.decode_snapshot_row)
    entry_rows = staticmethod(protobuf_wire.decode_entry_rows)

    def journal_entry(self, *, sequence: int, position: str, commit_time_unix_us: int, xid: int,
                      action: Action, old: StoredRow | None, new: StoredRow | None) -> bytes:
        seconds, micros = divmod(commit_time_unix_us, 1_000_000)
        head = protobuf_wire.journal_entry_head(sequence=sequence, position=position, seconds=seconds,
                                                nanos=micros * 1000, action=action.value, xid=xid)
        parts: list[Any] = [head]
        if old is not None:
            parts += _reframed(old.encoded, _OLD_VALUES)
        if new is not None:
            parts += _reframed(new.encoded, _NEW_VALUES)
        entry = b"".join(parts)
        return b"".join((_JOURNAL_ENTRY, varint(len(entry)), entry))

    def entry_as(self, encoded: bytes, action: Action) -> bytes:
        # rare (a row entering or leaving a client's filter): the generated code rewrites the message
        message = pb.SyncResponse.FromString(encoded)
        entry = message.journal_entry
        entry.action = action.value
        entry.ClearField("new_values" if action is Action.DELETE else "old_values")
        return message.SerializeToString()

    def journal_entries(self, entries: Sequence[JournalEntry]) -> bytes:
        if len(entries) == 1:
            return entries[0].encoded
        parts: list[Any] = []
        for entry in entries:
            parts += _reframed(entry.encoded, _REPEATED_ELEMENT)
        size = sum(len(e.encoded) for e in entries)
        return b"".join((_JOURNAL_BATCH, varint(size), *parts))

    def snapshot_rows(self, rows: Sequence[StoredRow]) -> bytes:
        if len(rows) == 1:
            encoded = rows[0].encoded
            return b"".join((_SNAPSHOT_ROW, varint(len(encoded)), encoded))
        parts: list[Any] = []
        size = 0
        for row in rows:
            length = varint(len(row.encoded))
            parts += (_REPEATED_ELEMENT, length, row.encoded)
            size += 1 + len(length) + len(row.encoded)
        return b"".join((_SNAPSHOT_ROWS, varint(size), *parts))

    def handshake(self, plan: SyncPlan, *, current_sequence: int, oldest_sequence: int,
                  columns: Sequence[ColumnInfo]) -> bytes:
        identity = plan.identity  # an extension: only for clients that asked (None otherwise)
        return pb.SyncResponse(handshake=pb.SyncHandshake(
            mode=_MODES[plan.mode], server_current_sequence=current_sequence,
            journal_oldest_sequence=oldest_sequence, resume_from_sequence=plan.resume_from_sequence,
            columns=column_definitions(tuple(columns)), snapshot_id=plan.snapshot_id,
            instance_id=identity.instance_id if identity else "", journal_epoch=identity.epoch if identity else "",
        )).SerializeToString()

    def snapshot_begin(self, *, snapshot_id: str, sequence: int, row_count: int, position: str) -> bytes:
        return pb.SyncResponse(snapshot_begin=pb.SnapshotBegin(
            snapshot_id=snapshot_id, sequence=sequence, row_count=row_count, source_position=position,
        )).SerializeToString()

    def snapshot_end(self, *, sequence: int, rows_sent: int, position: str) -> bytes:
        return pb.SyncResponse(snapshot_end=pb.SnapshotEnd(
            sequence=sequence, rows_sent=rows_sent, source_position=position,
        )).SerializeToString()

    def heartbeat(self, *, current_sequence: int, server_time: float) -> bytes:
        stamp = Timestamp()
        stamp.FromNanoseconds(int(server_time * 1e9))
        return pb.SyncResponse(heartbeat=pb.Heartbeat(current_sequence=current_sequence,
                                                      server_time=stamp)).SerializeToString()

    def schema_change(self, *, sequence: int, old_columns: Sequence[ColumnInfo],
                      new_columns: Sequence[ColumnInfo]) -> bytes:
        return pb.SyncResponse(schema_change=pb.SchemaChangeNotification(
            sequence=sequence, old_columns=column_definitions(tuple(old_columns)),
            new_columns=column_definitions(tuple(new_columns)),
        )).SerializeToString()

    def go_away(self, *, reason: str, drain_deadline_unix_ms: int) -> bytes:
        return pb.SyncResponse(go_away=pb.GoAway(reason=reason, drain_deadline_unix_ms=drain_deadline_unix_ms)
                               ).SerializeToString()

    def fetch_begin(self, *, snapshot_id: str, sequence: int, row_count: int, position: str) -> bytes:
        return pb.FetchSnapshotResponse(begin=pb.SnapshotBegin(
            snapshot_id=snapshot_id, sequence=sequence, row_count=row_count, source_position=position,
        )).SerializeToString()

    def fetch_row(self, row: StoredRow) -> bytes:
        return b"".join((_FETCH_ROW, varint(len(row.encoded)), row.encoded))

    def fetch_end(self, *, sequence: int, rows_sent: int, position: str) -> bytes:
        return pb.FetchSnapshotResponse(end=pb.SnapshotEnd(
            sequence=sequence, rows_sent=rows_sent, source_position=position,
        )).SerializeToString()


@lru_cache(maxsize=256)
def column_definitions(columns: tuple[ColumnInfo, ...]) -> tuple[pb.ColumnDefinition, ...]:
    return tuple(
        pb.ColumnDefinition(ordinal_position=i, column_name=c.name, data_type=c.type_name,
                            not_null=c.not_null, is_primary_key=c.primary_key_ordinal > 0,
                            primary_key_ordinal=c.primary_key_ordinal)
        for i, c in enumerate(columns, start=1)
    )
