"""Streamed in-progress transactions: spooling, subtransaction and top-level aborts, replay at commit,
spilling to disk; random and mutated protocol-2 input only ever raises ProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laredo_kernel.errors import ProtocolError

from laredo_ingest.application.transaction_spool import SpillingSpool
from laredo_ingest.domain.pgoutput import (
    Begin,
    Commit,
    Insert,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    decode_message,
    split_streamed,
)
from laredo_ingest.domain.streamed import MemorySpool, StreamedTransactions

TUPLE = b"\x00\x01t\x00\x00\x00\x011"


def streamed_insert(subxid: int, value: bytes = b"1") -> bytes:
    return b"I" + struct.pack("!II", subxid, 16385) + b"N" + b"\x00\x01t" + struct.pack("!i", len(value)) + value


def value_of(message: Insert) -> bytes:
    return message.new_tuple[7:]


def test_stream_control_messages_decode() -> None:
    assert decode_message(b"S" + struct.pack("!IB", 700, 1)) == StreamStart(700, True)
    assert decode_message(b"E") == StreamStop()
    assert decode_message(b"c" + struct.pack("!IBQQq", 700, 0, 0x500, 0x530, 99)) == StreamCommit(700, 0, 0x500,
                                                                                                   0x530, 99)
    assert decode_message(b"A" + struct.pack("!II", 700, 701)) == StreamAbort(700, 701)


def test_split_streamed_strips_the_xid() -> None:
    xid, message = split_streamed(b"w" + bytes(24) + streamed_insert(701), 25)
    assert xid == 701 and decode_message(message) == Insert(16385, b"\x00\x01t\x00\x00\x00\x011")
    assert split_streamed(b"O" + bytes(8) + b"origin\0") == (0, b"O" + bytes(8) + b"origin\0")
    with pytest.raises(ProtocolError, match="cannot appear inside a streamed block"):
        split_streamed(b"B" + bytes(20))
    with pytest.raises(ProtocolError, match="too short"):
        split_streamed(b"I\x00")


def run(router: StreamedTransactions, messages: list) -> list:
    out = []
    for message in messages:
        if isinstance(message, bytes):
            router.add(message, 0)
        elif isinstance(message, StreamStart):
            router.start(message)
        elif isinstance(message, StreamStop):
            router.stop()
        elif isinstance(message, StreamAbort):
            router.abort(message)
        else:
            out.extend(router.commit(message))
    return out


@pytest.mark.parametrize("spool", [MemorySpool, lambda: SpillingSpool(memory_limit=20)], ids=["memory", "spilling"])
def test_commit_replays_the_surviving_messages_between_begin_and_commit(spool) -> None:
    router = StreamedTransactions(spool)
    out = run(router, [
        StreamStart(700, True), streamed_insert(700, b"a"), streamed_insert(701, b"sub-1"), StreamStop(),
        StreamStart(800, True), streamed_insert(800, b"other"), StreamStop(),
        StreamStart(700, False), streamed_insert(702, b"sub-2"), streamed_insert(703, b"sub-3"), StreamStop(),
        StreamAbort(700, 702),  # rolls back 702 and 703 (nested in it)
        StreamStart(700, False), streamed_insert(704, b"after"), StreamStop(),
        StreamAbort(800, 800),
        StreamCommit(700, 0, 0x900, 0x930, 5),
    ])
    assert out[0] == Begin(0x900, 5, 700) and out[-1] == Commit(0, 0x900, 0x930, 5)
    assert [value_of(m) for m in out[1:-1]] == [b"a", b"sub-1", b"after"]
    assert router.open_transactions == 0 and router.buffered_bytes == 0


def test_protocol_misuse_is_a_protocol_error() -> None:
    router = StreamedTransactions()
    with pytest.raises(ProtocolError, match="without a Stream Start"):
        router.stop()
    router.start(StreamStart(1, True))
    with pytest.raises(ProtocolError, match="inside the block"):
        router.start(StreamStart(2, True))
    with pytest.raises(ProtocolError, match="inside the stream block"):
        list(router.commit(StreamCommit(1, 0, 1, 2, 3)))


def test_a_commit_of_an_unknown_transaction_is_empty() -> None:
    out = list(StreamedTransactions().commit(StreamCommit(9, 0, 0x10, 0x20, 0)))
    assert [type(m) for m in out] == [Begin, Commit]


def test_the_spilling_spool_moves_to_a_file_and_rolls_back_there() -> None:
    spool = SpillingSpool(memory_limit=100)
    spool.append(1, b"x" * 60)
    spool.append(2, b"y" * 60)  # over the limit: spilled
    spool.append(2, b"z" * 10)
    spool.append(3, b"w" * 10)
    assert spool.spilled and spool.count == 4 and spool.size_bytes == 140
    spool.rollback_to(3)
    assert list(spool.messages()) == [b"x" * 60, b"y" * 60, b"z" * 10] and spool.size_bytes == 130
    spool.append(4, b"v" * 5)
    spool.rollback_to(1)  # began in memory: everything goes
    assert list(spool.messages()) == [] and spool.size_bytes == 0
    spool.append(5, b"after")
    assert list(spool.messages()) == [b"after"]
    spool.close()


def test_the_spilling_spool_reads_back_big_messages() -> None:
    spool = SpillingSpool(memory_limit=0)
    big = [bytes([i]) * (700_000 + i) for i in range(3)]
    for i, message in enumerate(big):
        spool.append(i, message)
    assert list(spool.messages()) == big
    spool.close()


def _feed_or_protocol_error(frames: list[bytes]) -> None:
    router = StreamedTransactions(lambda: SpillingSpool(memory_limit=64))
    try:
        for frame in frames:
            if router.in_block and frame[:1] != b"E":
                router.add(frame, 0)
                continue
            message = decode_message(frame)
            if isinstance(message, StreamStart):
                router.start(message)
            elif isinstance(message, StreamStop):
                router.stop()
            elif isinstance(message, StreamAbort):
                router.abort(message)
            elif isinstance(message, StreamCommit):
                list(router.commit(message))
    except ProtocolError:
        pass
    finally:
        router.close()


GOLDEN_STREAM = [b"S" + struct.pack("!IB", 700, 1), streamed_insert(700), streamed_insert(701), b"E",
                 b"A" + struct.pack("!II", 700, 701), b"S" + struct.pack("!IB", 700, 0), streamed_insert(700), b"E",
                 b"c" + struct.pack("!IBQQq", 700, 0, 0x500, 0x530, 99)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12))
def test_random_frames_only_ever_raise_protocol_error(frames: list[bytes]) -> None:
    _feed_or_protocol_error(frames)


@settings(max_examples=800, deadline=None)
@given(st.data())
def test_mutated_streamed_transactions_only_ever_raise_protocol_error(data: st.DataObject) -> None:
    frames = [bytearray(f) for f in GOLDEN_STREAM]
    for _ in range(data.draw(st.integers(1, 5))):
        frame = frames[data.draw(st.integers(0, len(frames) - 1))]
        choice = data.draw(st.sampled_from(["flip", "cut", "insert", "drop"]))
        if choice == "flip" and frame:
            frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
        elif choice == "cut" and frame:
            del frame[data.draw(st.integers(0, len(frame) - 1)):]
        elif choice == "insert":
            frame.insert(data.draw(st.integers(0, len(frame))), data.draw(st.integers(0, 255)))
        elif len(frames) > 1:
            frames.remove(frame)
    _feed_or_protocol_error([bytes(f) for f in frames])
