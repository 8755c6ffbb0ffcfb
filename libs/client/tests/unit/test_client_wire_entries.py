"""Journal entries, batches and snapshot rows located in SyncResponse bytes agree with protobuf's parser; the
stream applies bytes as it applies the same messages parsed, and falls back to protobuf where it must."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from google.protobuf import struct_pb2

from laredo.replication.v1 import replication_pb2 as pb
from laredo_client import ProtocolViolation
from laredo_client.client_replica import ClientReplica, position_key
from laredo_client.options import ClientOptions
from laredo_client.stats import ClientStats
from laredo_client.sync_stream import SyncStream
from laredo_kernel import sync_wire as wire
from laredo_kernel.sync_wire import EntrySpan, NotCanonical, WireError, journal_entry, only_field, repeated_field_1
from laredo_kernel.sync_wire import snapshot_row
from laredo_kernel.position import Position, PositionError
from libs.client.tests.scripted_server import batch, entry, handshake, pos, struct
from libs.client.tests.unit.test_client_wire_struct import reference


def fields_of(span: EntrySpan, data: bytes) -> tuple[Any, ...]:
    sequence, position, action, old_start, old_end, new_start, new_end = span
    old = reference(struct_pb2.Struct.FromString(data[old_start:old_end])) if old_start >= 0 else None
    new = reference(struct_pb2.Struct.FromString(data[new_start:new_end])) if new_start >= 0 else None
    return sequence, position, action.decode(), old, new


def expected(message: pb.ReplicationJournalEntry) -> tuple[Any, ...]:
    old = reference(message.old_values) if message.HasField("old_values") else None
    new = reference(message.new_values) if message.HasField("new_values") else None
    return message.sequence, message.source_position, message.action, old, new


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fanout_layout(message: pb.ReplicationJournalEntry) -> bytes:
    """The fields as the fan-out writes them: 1-4, xid (100), then old (5) and new (6)."""
    head = pb.ReplicationJournalEntry()
    head.CopyFrom(message)
    head.ClearField("old_values")
    head.ClearField("new_values")
    rows = b""
    if message.HasField("old_values"):
        rows += field(5, message.old_values.SerializeToString())
    if message.HasField("new_values"):
        rows += field(6, message.new_values.SerializeToString())
    return head.SerializeToString() + rows


ROW = {"id": 1, "name": "n1", "team": "a"}


@pytest.mark.parametrize("message", [
    pb.ReplicationJournalEntry(sequence=5, source_position="0/16B3748:3", action="INSERT", xid=77,
                               new_values=struct(ROW)),
    pb.ReplicationJournalEntry(sequence=2**40, source_position="0/1:1", action="UPDATE", old_values=struct(ROW),
                               new_values=struct({**ROW, "name": "é" * 200})),
    pb.ReplicationJournalEntry(sequence=-3, action="DELETE", old_values=struct({"id": 1})),
    pb.ReplicationJournalEntry(sequence=9, source_position="p" * 300, action="TRUNCATE"),
    pb.ReplicationJournalEntry(),
], ids=["insert", "update-long", "negative-no-position", "long-position", "empty"])
@pytest.mark.parametrize("layout", ["numbered", "fanout"])
def test_entries_in_both_layouts_read_as_protobuf_reads_them(message: pb.ReplicationJournalEntry,
                                                             layout: str) -> None:
    message.timestamp.seconds = 1_795_000_000
    data = message.SerializeToString() if layout == "numbered" else fanout_layout(message)
    assert pb.ReplicationJournalEntry.FromString(data) == message
    assert fields_of(journal_entry(data, 0, len(data)), data) == expected(message)


def test_what_servers_write_takes_the_straight_line_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def general(*_: Any) -> EntrySpan:
        raise AssertionError("took the general path")

    monkeypatch.setattr(wire, "_journal_entry_any", general)
    for sequence in (1, 200, 2**20, 2**35):
        message = pb.ReplicationJournalEntry(sequence=sequence, source_position="1A/16B3748:12", action="UPDATE",
                                             xid=2**31, old_values=struct(ROW), new_values=struct({"x": "y" * 300}))
        message.timestamp.seconds, message.timestamp.nanos = 1_795_000_000, 123_456_000
        for data in (message.SerializeToString(), fanout_layout(message)):
            assert fields_of(journal_entry(data, 0, len(data)), data) == expected(message)


def test_fields_in_any_order_with_unknown_ones_read_as_protobuf_reads_them() -> None:
    message = pb.ReplicationJournalEntry(sequence=300, source_position="0/2:2", action="UPDATE", xid=1,
                                         old_values=struct({"id": 2}), new_values=struct(ROW))
    parts = [pb.ReplicationJournalEntry(sequence=300).SerializeToString(), field(2, b"0/2:2"), field(4, b"UPDATE"),
             field(5, message.old_values.SerializeToString()), field(6, message.new_values.SerializeToString()),
             pb.ReplicationJournalEntry(xid=1).SerializeToString(), field(250, b"unknown"), b"\x98\x3e\x01"]
    for order in itertools.islice(itertools.permutations(parts), 0, None, 97):
        data = b"".join(order)
        assert fields_of(journal_entry(data, 0, len(data)), data) == expected(message), order


def test_a_row_split_over_two_fields_is_left_to_protobuf() -> None:
    data = field(6, struct({"id": 1}).SerializeToString()) + field(6, struct({"name": "x"}).SerializeToString())
    with pytest.raises(NotCanonical):
        journal_entry(data, 0, len(data))
    assert reference(pb.ReplicationJournalEntry.FromString(data).new_values) == {"id": 1.0, "name": "x"}


@pytest.mark.parametrize("data", [b"\x08", b"\x08\x01\x12\x05ab", b"\x2a\x90", b"\x12\x02\xff\xfe"])
def test_truncated_entries_raise(data: bytes) -> None:
    with pytest.raises((WireError, IndexError, UnicodeDecodeError)):
        journal_entry(data, 0, len(data))


@settings(max_examples=200, deadline=None)
@given(sequence=st.integers(-(2**63), 2**63 - 1), position=st.text(max_size=140), action=st.text(max_size=10),
       xid=st.integers(0, 2**63 - 1), seconds=st.integers(0, 2**40),
       old=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=150), max_size=3),
       new=st.none() | st.dictionaries(st.text(max_size=5), st.floats(allow_nan=False), max_size=3),
       layout=st.sampled_from(["numbered", "fanout"]))
def test_any_entry_reads_as_protobuf_reads_it(sequence: int, position: str, action: str, xid: int, seconds: int,
                                              old: dict[str, Any] | None, new: dict[str, Any] | None,
                                              layout: str) -> None:
    message = pb.ReplicationJournalEntry(sequence=sequence, source_position=position, action=action, xid=xid)
    message.timestamp.seconds = seconds
    if old is not None:
        message.old_values.CopyFrom(struct(old))
    if new is not None:
        message.new_values.CopyFrom(struct(new))
    data = message.SerializeToString() if layout == "numbered" else fanout_layout(message)
    assert fields_of(journal_entry(data, 0, len(data)), data) == expected(message)


def test_batches_snapshot_rows_and_the_single_field_of_a_response() -> None:
    message = batch(entry(1, pos(1), "INSERT", new=ROW), entry(2, pos(2), "DELETE", old={"id": 1}))
    data = message.SerializeToString()
    number, start, end = only_field(data) or (0, 0, 0)
    assert number == 101
    assert [fields_of(s, data) for s in repeated_field_1(data, start, end, journal_entry)] == [
        expected(e) for e in message.journal_batch.entries]
    rows = pb.SyncResponse(snapshot_rows=pb.SnapshotRowBatch(rows=[pb.SnapshotRow(row=struct(ROW)), pb.SnapshotRow()]))
    data = rows.SerializeToString()
    number, start, end = only_field(data) or (0, 0, 0)
    assert number == 100
    spans = repeated_field_1(data, start, end, snapshot_row)
    assert [reference(struct_pb2.Struct.FromString(data[a:b])) for a, b in spans] == [
        {"id": 1.0, "name": "n1", "team": "a"}, {}]
    single = pb.SnapshotRow(row=struct(ROW)).SerializeToString()
    assert snapshot_row(single, 0, len(single)) == (2, len(single))
    assert only_field(b"") is None and only_field(b"\x08\x01") is None  # empty; a varint field
    assert only_field(entry(1, pos(1), "INSERT").SerializeToString() + b"\x38\x01") is None  # two fields


# -- the stream: bytes and parsed messages give the same result ------------------------------------------------

OPTIONS = ClientOptions(address="unused:1", schema="public", table="items")


def stream() -> SyncStream:
    s = SyncStream(OPTIONS, ClientReplica(), pb.SyncRequest(), name="s", stats=ClientStats(),
                   on_caught_up=lambda _: None, primary=True)
    s.handle(handshake("DELTA", current=10, resume=0))
    return s


def test_an_entry_whose_row_is_split_applies_the_merged_row() -> None:
    new = (field(6, struct({"id": 1, "name": "a"}).SerializeToString())
           + field(6, struct({"team": "b"}).SerializeToString()))
    body = pb.ReplicationJournalEntry(sequence=1, source_position=pos(1), action="INSERT").SerializeToString() + new
    s = stream()
    s.handle_bytes(field(5, body))
    assert s.replica.rows.get((1,)) == {"id": 1, "name": "a", "team": "b"}
    assert s.stats.entries_applied == 1 and s.applied_sequence == 1


@pytest.mark.parametrize("data", [
    field(5, b"\x08\x01\x12\x05ab"),  # an entry cut short
    field(101, field(1, b"\x08\x01\x32\x05\x0a\x03\x0a\x01"),),  # a row cut short
    b"\xaa\x06\x05\x0a",  # a batch longer than the message
])
def test_undecodable_bytes_end_the_stream_with_a_protocol_violation(data: bytes) -> None:
    with pytest.raises(ProtocolViolation):
        stream().handle_bytes(data)


def test_an_unknown_action_is_a_protocol_violation_and_earlier_entries_stay_applied() -> None:
    s = stream()
    data = batch(entry(1, pos(1), "INSERT", new=ROW), entry(2, pos(2), "MERGE", new=ROW)).SerializeToString()
    with pytest.raises(ProtocolViolation, match="MERGE"):
        s.handle_bytes(data)
    assert s.applied_sequence == 1 and s.stats.entries_applied == 1


def test_entries_before_the_handshake_are_a_protocol_violation() -> None:
    s = SyncStream(OPTIONS, ClientReplica(), pb.SyncRequest(), name="s", stats=ClientStats(),
                   on_caught_up=lambda _: None)
    with pytest.raises(ProtocolViolation, match="before the handshake"):
        s.handle_bytes(entry(1, pos(1), "INSERT", new=ROW).SerializeToString())


def test_an_empty_batch_changes_nothing_and_rows_outside_a_snapshot_are_a_protocol_violation() -> None:
    s = stream()
    s.handle_bytes(pb.SyncResponse(journal_batch=pb.JournalEntryBatch()).SerializeToString())
    assert s.applied_sequence == 0 and s.stats.entries_applied == 0
    with pytest.raises(ProtocolViolation, match="outside SnapshotBegin"):
        s.handle_bytes(pb.SyncResponse(snapshot_row=pb.SnapshotRow(row=struct(ROW))).SerializeToString())


def test_unknown_response_fields_are_ignored() -> None:
    s = stream()
    s.handle_bytes(field(200, b"future"))
    assert s.applied_sequence == 0


# -- positions ------------------------------------------------------------------------------------------------

def parsed(text: str) -> tuple[int, int, int] | None:
    try:
        position = Position.parse(text)
    except PositionError:
        return None
    return position.key


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"\s?[0-9A-Fa-fx_+-]{0,9}/[0-9A-Fa-f_ ]{0,9}(:b?[0-9]{0,6})?\s?", fullmatch=True) | st.text())
def test_position_key_reads_positions_as_position_parse_does(text: str) -> None:
    assert position_key(text) == (parsed(text) if text else None)
