"""ProtobufSyncEncoder: hand-framed bytes parse as the messages protobuf itself would build."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_core.changes import Action, ColumnInfo
from laredo_core.jsonvalue import row_to_json
from laredo_core.position import Position
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder, varint
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.sync_plan import SyncMode, SyncPlan
from laredo_fanout.domain.table_state import StoredRow

ENCODER = ProtobufSyncEncoder()
ROWS: list[dict[str, Any]] = [
    {},
    {"id": 1, "name": "a"},
    {"id": 2, "big": "x" * 200},  # lengths around the one/two-byte varint boundary
    {"id": 3, "big": "y" * 20_000, "n": None, "ok": True, "amount": Decimal("1.50"),
     "at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "tags": ["a", "b"], "doc": {"k": [1, 2]}},
]


def stored(values: dict[str, Any]) -> StoredRow:
    return StoredRow((values.get("id"),), MappingProxyType(values), ENCODER.encode_row(values))


def expected_struct(values: dict[str, Any]) -> dict[str, Any]:
    message = rpb.SnapshotRow()
    message.row.update(row_to_json(values))
    return MessageToDict(message.row)


@pytest.mark.parametrize("values", ROWS, ids=["empty", "small", "medium", "large"])
def test_row_and_journal_entry_round_trip(values: dict[str, Any]) -> None:
    row, previous = stored(values), stored({"id": 0, "old": "o"})
    assert MessageToDict(rpb.SnapshotRow.FromString(row.encoded).row) == expected_struct(values)
    data = ENCODER.journal_entry(sequence=300, position="0/16B3748:2", commit_time_unix_us=1_700_000_000_250_000,
                                 xid=77, action=Action.UPDATE, old=previous, new=row)
    message = rpb.SyncResponse.FromString(data)
    entry = message.journal_entry
    assert message.WhichOneof("message") == "journal_entry"
    assert (entry.sequence, entry.source_position, entry.action, entry.xid) == (300, "0/16B3748:2", "UPDATE", 77)
    assert (entry.timestamp.seconds, entry.timestamp.nanos) == (1_700_000_000, 250_000_000)
    assert MessageToDict(entry.old_values) == {"id": 0.0, "old": "o"}
    assert entry.HasField("new_values") and MessageToDict(entry.new_values) == expected_struct(values)


def test_delete_and_truncate_entries_omit_absent_rows() -> None:
    delete = rpb.SyncResponse.FromString(ENCODER.journal_entry(
        sequence=1, position="", commit_time_unix_us=0, xid=0, action=Action.DELETE, old=stored(ROWS[1]), new=None))
    assert delete.journal_entry.HasField("old_values") and not delete.journal_entry.HasField("new_values")
    truncate = rpb.SyncResponse.FromString(ENCODER.journal_entry(
        sequence=2, position="", commit_time_unix_us=0, xid=0, action=Action.TRUNCATE, old=None, new=None))
    assert not truncate.journal_entry.HasField("old_values") and truncate.journal_entry.action == "TRUNCATE"


def test_batches_concatenate_the_cached_bytes() -> None:
    rows = [stored(v) for v in ROWS]
    single = rpb.SyncResponse.FromString(ENCODER.snapshot_rows(rows[1:2]))
    assert single.WhichOneof("message") == "snapshot_row"
    batch = rpb.SyncResponse.FromString(ENCODER.snapshot_rows(rows))
    assert batch.WhichOneof("message") == "snapshot_rows"
    assert [MessageToDict(r.row) for r in batch.snapshot_rows.rows] == [expected_struct(v) for v in ROWS]

    entries = [
        JournalEntry(i, Position(i), 0, 0, Action.INSERT, None, row, 0.0,
                     ENCODER.journal_entry(sequence=i, position=str(Position(i)), commit_time_unix_us=0, xid=0,
                                           action=Action.INSERT, old=None, new=row))
        for i, row in enumerate(rows, start=1)
    ]
    assert ENCODER.journal_entries(entries[:1]) == entries[0].encoded
    packed = rpb.SyncResponse.FromString(ENCODER.journal_entries(entries))
    assert packed.WhichOneof("message") == "journal_batch"
    assert list(packed.journal_batch.entries) == [rpb.SyncResponse.FromString(e.encoded).journal_entry
                                                  for e in entries]


def test_control_messages() -> None:
    columns = (ColumnInfo("id", 23, "int4", not_null=True, primary_key_ordinal=1), ColumnInfo("v", 25, "text"))
    handshake = rpb.SyncResponse.FromString(ENCODER.handshake(
        SyncPlan(SyncMode.DELTA, 5), current_sequence=9, oldest_sequence=2, columns=columns)).handshake
    assert (handshake.mode, handshake.server_current_sequence, handshake.journal_oldest_sequence,
            handshake.resume_from_sequence) == (rpb.SYNC_MODE_DELTA, 9, 2, 5)
    assert [(c.ordinal_position, c.column_name, c.data_type, c.is_primary_key) for c in handshake.columns] == [
        (1, "id", "int4", True), (2, "v", "text", False)]
    begin = rpb.SyncResponse.FromString(ENCODER.snapshot_begin(snapshot_id="s", sequence=3, row_count=4,
                                                               position="0/1")).snapshot_begin
    assert (begin.snapshot_id, begin.sequence, begin.row_count, begin.source_position) == ("s", 3, 4, "0/1")
    beat = rpb.SyncResponse.FromString(ENCODER.heartbeat(current_sequence=7, server_time=1.5)).heartbeat
    assert (beat.current_sequence, beat.server_time.seconds, beat.server_time.nanos) == (7, 1, 500_000_000)


@pytest.mark.parametrize(("value", "expected"), [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02")])
def test_varint(value: int, expected: bytes) -> None:
    assert varint(value) == expected
