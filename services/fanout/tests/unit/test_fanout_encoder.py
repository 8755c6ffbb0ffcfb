"""ProtobufSyncEncoder: hand-framed bytes parse as the messages protobuf itself would build."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.changes import Action, ColumnInfo
from laredo_kernel.jsonvalue import row_to_json
from laredo_kernel.position import Position
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
    {"id": 4, "off": False, "zero": 0, "neg": -5, "f": 2.5, "huge": 2**60, "nan": float("nan"), "nested": [[], {}],
     "deep": {"a": {"b": [None, True, "é" * 100]}}, "ünï": "ключ"},
]


def stored(values: dict[str, Any]) -> StoredRow:
    """Rows hold JSON-compatible values (what the feed delivers, see ports.FeedMessage)."""
    values = row_to_json(values)
    return StoredRow((values.get("id"),), ENCODER.encode_row(values))


def expected_struct(values: dict[str, Any]) -> dict[str, Any]:
    message = rpb.SnapshotRow()
    message.row.update(row_to_json(values))
    return MessageToDict(message.row)


@pytest.mark.parametrize("values", ROWS, ids=["empty", "small", "medium", "large", "every kind"])
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


@pytest.mark.parametrize("values", ROWS, ids=["empty", "small", "medium", "large", "every kind"])
def test_a_row_decodes_to_the_values_it_was_encoded_from(values: dict[str, Any]) -> None:
    """A fan-out row keeps only its wire form: reading it back gives the JSON values in their column order, whole
    numbers as ints; encoding those again gives the same bytes."""
    original = row_to_json(values)
    decoded = ENCODER.decode_row(ENCODER.encode_row(original))
    assert decoded == original and list(decoded) == list(original)
    assert ENCODER.encode_row(decoded) == ENCODER.encode_row(original)
    assert type(decoded.get("zero", 0)) is int and type(decoded.get("f", 2.5)) is float


def test_a_float_column_whole_value_reads_back_as_the_same_number() -> None:
    encoded = ENCODER.encode_row({"x": 2.0, "big": 2.0**60, "half": 0.5})
    assert ENCODER.decode_row(encoded) == {"x": 2, "big": 2**60, "half": 0.5}
    assert ENCODER.encode_row(ENCODER.decode_row(encoded)) == encoded


@pytest.mark.parametrize("action", list(Action))
def test_an_entry_reads_back_its_action_and_rows(action: Action) -> None:
    """A journal entry keeps only its message: what a filter needs is read back from it."""
    old = stored(ROWS[4]) if action in (Action.UPDATE, Action.DELETE) else None
    new = stored(ROWS[3]) if action in (Action.INSERT, Action.UPDATE) else None
    for micros, xid in ((0, 0), (1_700_000_000_250_001, 2**40)):
        data = ENCODER.journal_entry(sequence=2**33, position="5@0/16B3748:2+1", commit_time_unix_us=micros, xid=xid,
                                     action=action, old=old, new=new)
        rows = ENCODER.entry_rows(data)
        assert rows.action is action
        assert rows.old == (ENCODER.decode_row(old.encoded) if old else None)
        assert rows.new == (ENCODER.decode_row(new.encoded) if new else None)


def test_an_update_as_an_insert_or_a_delete_keeps_everything_but_the_other_row() -> None:
    """A row entering (leaving) a client's filter: the entry goes to it as an INSERT (DELETE) of one row."""
    old, new = stored(ROWS[4]), stored(ROWS[3])
    data = ENCODER.journal_entry(sequence=9, position="0/16B3748:2", commit_time_unix_us=1_700_000_000_250_000,
                                 xid=77, action=Action.UPDATE, old=old, new=new)
    for action, kept in ((Action.INSERT, "new_values"), (Action.DELETE, "old_values")):
        entry = rpb.SyncResponse.FromString(ENCODER.entry_as(data, action)).journal_entry
        original = rpb.SyncResponse.FromString(data).journal_entry
        assert entry.action == action.value and entry.HasField(kept)
        assert not entry.HasField("old_values" if kept == "new_values" else "new_values")
        assert getattr(entry, kept) == getattr(original, kept)
        assert (entry.sequence, entry.source_position, entry.timestamp, entry.xid) == (
            original.sequence, original.source_position, original.timestamp, original.xid)


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
        JournalEntry(i, Position(i), ENCODER.journal_entry(sequence=i, position=str(Position(i)),
                                                           commit_time_unix_us=0, xid=0, action=Action.INSERT,
                                                           old=None, new=row), 0.0)
        for i, row in enumerate(rows, start=1)
    ]
    assert ENCODER.journal_entries(entries[:1]) == entries[0].encoded
    packed = rpb.SyncResponse.FromString(ENCODER.journal_entries(entries))
    assert packed.WhichOneof("message") == "journal_batch"
    assert list(packed.journal_batch.entries) == [rpb.SyncResponse.FromString(e.encoded).journal_entry
                                                  for e in entries]


def test_hand_encoded_entry_equals_the_protobuf_serialization() -> None:
    row = stored(ROWS[4])
    for sequence, seconds, nanos, xid in ((1, 0, 0, 0), (2**40, 1_700_000_000, 1000, 2**31), (5, 0, 7, 3)):
        data = ENCODER.journal_entry(sequence=sequence, position="0/1:2", commit_time_unix_us=seconds * 10**6 + nanos
                                     // 1000, xid=xid, action=Action.INSERT, old=None, new=row)
        expected = rpb.ReplicationJournalEntry(sequence=sequence, source_position="0/1:2", action="INSERT", xid=xid)
        expected.timestamp.SetInParent()
        expected.timestamp.seconds, expected.timestamp.nanos = seconds, nanos // 1000 * 1000
        expected.new_values.update(ENCODER.decode_row(row.encoded))
        assert rpb.SyncResponse.FromString(data).journal_entry == expected


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


def test_schema_change_go_away_and_fetch_messages() -> None:
    old = (ColumnInfo("id", 23, "int4", primary_key_ordinal=1),)
    new = (*old, ColumnInfo("v", 25, "text"))
    change = rpb.SyncResponse.FromString(ENCODER.schema_change(sequence=4, old_columns=old, new_columns=new))
    assert change.schema_change.sequence == 4
    assert [c.column_name for c in change.schema_change.new_columns] == ["id", "v"]
    away = rpb.SyncResponse.FromString(ENCODER.go_away(reason="admin", drain_deadline_unix_ms=5)).go_away
    assert (away.reason, away.drain_deadline_unix_ms) == ("admin", 5)
    row = rpb.FetchSnapshotResponse.FromString(ENCODER.fetch_row(stored(ROWS[1])))
    assert MessageToDict(row.row.row) == {"id": 1.0, "name": "a"}
    begin = rpb.FetchSnapshotResponse.FromString(ENCODER.fetch_begin(snapshot_id="s", sequence=2, row_count=3,
                                                                       position="0/1")).begin
    end = rpb.FetchSnapshotResponse.FromString(ENCODER.fetch_end(sequence=2, rows_sent=3, position="0/1")).end
    assert (begin.snapshot_id, begin.row_count, end.rows_sent, end.source_position) == ("s", 3, 3, "0/1")
