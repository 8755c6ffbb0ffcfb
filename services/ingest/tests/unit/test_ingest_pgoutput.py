"""pgoutput decoder: golden byte strings per message type, and corrupt input only ever raises ProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laredo_kernel.errors import ProtocolError
from laredo_kernel.tuples import UNCHANGED, decode_tuple_exact

from laredo_ingest.domain.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    Relation,
    RelationColumn,
    Truncate,
    TypeMessage,
    Update,
    decode_message,
)

# TupleData for (1, 'ab', NULL): count 3, 't' len 1 "1", 't' len 2 "ab", 'n'
TUPLE = b"\x00\x03" + b"t\x00\x00\x00\x011" + b"t\x00\x00\x00\x02ab" + b"n"
KEY = b"\x00\x03" + b"t\x00\x00\x00\x011" + b"n" + b"n"
WITH_TOAST = b"\x00\x02" + b"t\x00\x00\x00\x012" + b"u"

GOLDEN = [
    pytest.param(b"B" + struct.pack("!QqI", 0x16B3748, 777_000_000, 4242),
                 Begin(0x16B3748, 777_000_000, 4242), id="begin"),
    pytest.param(b"C" + struct.pack("!BQQq", 0, 0x16B3748, 0x16B3778, 777_000_001),
                 Commit(0, 0x16B3748, 0x16B3778, 777_000_001), id="commit"),
    pytest.param(b"O" + struct.pack("!Q", 0xABC) + b"node_a\0", Origin(0xABC, "node_a"), id="origin"),
    pytest.param(b"R" + struct.pack("!I", 16385) + b"public\0users\0d" + struct.pack("!h", 2)
                 + b"\x01id\0" + struct.pack("!Ii", 23, -1) + b"\x00name\0" + struct.pack("!Ii", 1043, 68),
                 Relation(16385, "public", "users", "d",
                          (RelationColumn(1, "id", 23, -1), RelationColumn(0, "name", 1043, 68))), id="relation"),
    pytest.param(b"Y" + struct.pack("!I", 90001) + b"public\0mood\0", TypeMessage(90001, "public", "mood"),
                 id="type"),
    pytest.param(b"I" + struct.pack("!I", 16385) + b"N" + TUPLE, Insert(16385, TUPLE), id="insert"),
    pytest.param(b"U" + struct.pack("!I", 16385) + b"N" + WITH_TOAST, Update(16385, b"", False, WITH_TOAST),
                 id="update-new-only"),
    pytest.param(b"U" + struct.pack("!I", 16385) + b"K" + KEY + b"N" + TUPLE, Update(16385, KEY, True, TUPLE),
                 id="update-key"),
    pytest.param(b"U" + struct.pack("!I", 16385) + b"O" + TUPLE + b"N" + WITH_TOAST,
                 Update(16385, TUPLE, False, WITH_TOAST), id="update-full-old"),
    pytest.param(b"D" + struct.pack("!I", 16385) + b"K" + KEY, Delete(16385, KEY, True), id="delete-key"),
    pytest.param(b"D" + struct.pack("!I", 16385) + b"O" + TUPLE, Delete(16385, TUPLE, False), id="delete-full"),
    pytest.param(b"T" + struct.pack("!iB", 2, 3) + struct.pack("!II", 16385, 16390),
                 Truncate(3, (16385, 16390)), id="truncate"),
    pytest.param(b"M" + struct.pack("!BQ", 1, 0x500) + b"laredo\0" + struct.pack("!i", 5) + b"hello",
                 LogicalMessage(True, 0x500, "laredo", b"hello"), id="message"),
]


@pytest.mark.parametrize(("data", "expected"), GOLDEN)
def test_golden_messages_decode_exactly(data: bytes, expected: object) -> None:
    assert decode_message(data) == expected


@pytest.mark.parametrize(("data", "expected"), GOLDEN)
def test_decoding_from_an_offset_in_a_memoryview_frame_gives_the_same_message(data: bytes, expected: object) -> None:
    frame = memoryview(b"w" + bytes(24) + data)
    assert decode_message(frame, 25) == expected


def test_tuples_are_forwarded_as_valid_tuple_data() -> None:
    update = decode_message(b"U" + struct.pack("!I", 1) + b"O" + TUPLE + b"N" + WITH_TOAST)
    assert isinstance(update, Update)
    assert decode_tuple_exact(update.old_tuple) == [b"1", b"ab", None]
    assert decode_tuple_exact(update.new_tuple) == [b"2", UNCHANGED]


def test_relation_key_flag() -> None:
    relation = decode_message(GOLDEN[3].values[0])
    assert isinstance(relation, Relation)
    assert [c.is_key for c in relation.columns] == [True, False]


@pytest.mark.parametrize(("data", "complaint"), [
    (b"", "empty"),
    (b"Z" + bytes(8), "unknown pgoutput message type"),
    (b"S" + bytes(3), "corrupt pgoutput 'S'"),
    (b"E" + bytes(1), "unexpected bytes"),
    (b"B" + bytes(5), "corrupt pgoutput 'B'"),
    (b"R" + struct.pack("!I", 1) + b"public\0users", "unterminated"),
    (b"R" + struct.pack("!I", 1) + b"public\0users\0x" + struct.pack("!h", 0), "replica identity"),
    (b"R" + struct.pack("!I", 1) + b"public\0users\0d" + struct.pack("!h", -1), "negative column count"),
    (b"I" + struct.pack("!I", 1) + b"X" + TUPLE, "expected 'N'"),
    (b"U" + struct.pack("!I", 1) + b"K" + b"\x00\x01t\x00\x00\x00\x09ab" + b"N", "claims 9 bytes"),
    (b"U" + struct.pack("!I", 1) + b"K" + KEY + b"Q" + TUPLE, "expected 'N'"),
    (b"D" + struct.pack("!I", 1) + b"N" + TUPLE, "expected 'K' or 'O'"),
    (b"T" + struct.pack("!iB", 3, 0) + struct.pack("!I", 1), "3 relations announced"),
    (b"M" + struct.pack("!BQ", 1, 5) + b"p\0" + struct.pack("!i", 99) + b"x", "does not fit"),
    (b"Y" + struct.pack("!I", 1) + b"public\0\xff\xfe\0", "corrupt pgoutput 'Y'"),
])
def test_corrupt_messages_raise_protocol_error_saying_what_is_wrong(data: bytes, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        decode_message(data)


def _decode_or_protocol_error(data: bytes) -> None:
    for buf, offset in ((data, 0), (memoryview(b"w" + bytes(24) + data), 25)):
        try:
            decode_message(buf, offset)
        except ProtocolError:
            pass


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_ever_raise_protocol_error(data: bytes) -> None:
    _decode_or_protocol_error(data)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from([p.values[0] for p in GOLDEN]), st.data())
def test_mutated_golden_messages_only_ever_raise_protocol_error(golden: bytes, data: st.DataObject) -> None:
    mutated = bytearray(golden)
    for _ in range(data.draw(st.integers(1, 4))):
        choice = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if choice == "flip" and mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
        elif choice == "cut" and mutated:
            del mutated[data.draw(st.integers(0, len(mutated) - 1)):]
        else:
            mutated.insert(data.draw(st.integers(0, len(mutated))), data.draw(st.integers(0, 255)))
    _decode_or_protocol_error(bytes(mutated))
