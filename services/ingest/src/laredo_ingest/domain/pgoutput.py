"""pgoutput message decoder (protocol versions 1 and 2): bytes in, message tuples out, ProtocolError otherwise.

Row-change messages are the hot path: their tuples are kept as the raw TupleData
bytes the stream forwards unchanged (laredo_kernel.tuples), so an Insert costs one
unpack and one slice. Messages are NamedTuples because they are created once per
change; everything here is pure and allocation-aware.

Protocol version 2 with streaming adds Stream Start/Stop/Commit/Abort; messages sent between a Stream
Start and its Stop carry the (sub)transaction xid right after their type byte: split_streamed() strips
it, and the rest decodes like a version 1 message.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from laredo_kernel.errors import ProtocolError

from laredo_ingest.domain.pgoutput_messages import (  # noqa: F401 - re-exported: the decoder's vocabulary
    Begin,
    Commit,
    Origin,
    RelationColumn,
    Relation,
    TypeMessage,
    Insert,
    Update,
    Delete,
    Truncate,
    LogicalMessage,
    StreamStart,
    StreamStop,
    StreamCommit,
    StreamAbort,
    PgOutputMessage,
)

_U32 = struct.Struct("!I")
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_BEGIN = struct.Struct("!QqI")
_COMMIT = struct.Struct("!BQQq")
_COLUMN_TAIL = struct.Struct("!Ii")
_MESSAGE_HEAD = struct.Struct("!BQ")
_TRUNCATE_HEAD = struct.Struct("!iB")
_STREAM_START = struct.Struct("!IB")
_STREAM_COMMIT = struct.Struct("!IBQQq")
_STREAM_ABORT = struct.Struct("!II")

REPLICA_IDENTITY_CODES = frozenset("dnfi")


Buffer = bytes | bytearray | memoryview


def decode_message(buf: Buffer, offset: int = 0) -> PgOutputMessage:
    """Decode the pgoutput message starting at `offset` and running to the end of `buf`."""
    if offset >= len(buf):
        raise ProtocolError(f"empty pgoutput message at byte {offset}")
    decoder = _DECODERS.get(buf[offset])
    if decoder is None:
        raise ProtocolError(
            f"unknown pgoutput message type {buf[offset]:#04x} at byte {offset} "
            "(protocol versions 1 and 2 are supported)"
        )
    if decoder not in _IN_PLACE_DECODERS:
        # The other messages are few per transaction; a bytes copy lets their string parsing use bytes.find.
        buf, offset = bytes(buf[offset:]), 0
    try:
        return decoder(buf, offset + 1)
    except (struct.error, IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"corrupt pgoutput {chr(buf[offset])!r} message: {exc}") from None


#: Messages that carry an xid when sent inside a streamed block (Origin never does).
STREAMABLE_TYPES = frozenset(b"IUDTRYM")


def split_streamed(buf: Buffer, offset: int = 0) -> tuple[int, bytes]:
    """A message sent inside a stream block: its (sub)transaction xid, and the message without the xid
    (a version 1 message, for decode_message). Origin messages have no xid and come back unchanged."""
    end = len(buf)
    if offset >= end:
        raise ProtocolError(f"empty pgoutput message at byte {offset}")
    kind = buf[offset]
    if kind == 0x4F:  # 'O'
        return 0, bytes(buf[offset:])
    if kind not in STREAMABLE_TYPES:
        raise ProtocolError(f"pgoutput message type {kind:#04x} cannot appear inside a streamed block")
    if offset + 5 > end:
        raise ProtocolError(f"streamed {chr(kind)!r} message too short for its xid ({end - offset} bytes)")
    (xid,) = _U32.unpack_from(buf, offset + 1)
    return xid, bytes(buf[offset : offset + 1]) + bytes(buf[offset + 5 :])


def decode_insert(buf: Buffer, offset: int) -> tuple[int, bytes]:
    """The hot path for the most frequent message: an Insert at offset -> (relation id, new TupleData)."""
    try:
        (relation_id,) = _U32.unpack_from(buf, offset + 1)
        marker = buf[offset + 5]
    except (struct.error, IndexError):
        raise ProtocolError(f"corrupt pgoutput 'I' message of {len(buf) - offset} bytes") from None
    if marker != 0x4E:  # 'N'
        raise ProtocolError(f"insert into relation {relation_id}: expected 'N' before the new tuple")
    return relation_id, bytes(buf[offset + 6 :])


def decode_row_change(buf: Buffer, offset: int) -> Update | Delete:
    """Update ('U') or Delete ('D') at offset, without the generic dispatch."""
    decoder = _update if buf[offset] == 0x55 else _delete
    try:
        return decoder(buf, offset + 1)
    except (struct.error, IndexError, ValueError) as exc:
        raise ProtocolError(f"corrupt pgoutput {chr(buf[offset])!r} message: {exc}") from None


def _begin(buf: Buffer, pos: int) -> Begin:
    return Begin(*_BEGIN.unpack_from(buf, pos))


def _commit(buf: Buffer, pos: int) -> Commit:
    return Commit(*_COMMIT.unpack_from(buf, pos))


def _origin(buf: bytes, pos: int) -> Origin:
    (lsn,) = struct.unpack_from("!Q", buf, pos)
    name, _ = _cstring(buf, pos + 8)
    return Origin(lsn, name)


def _relation(buf: bytes, pos: int) -> Relation:
    (relation_id,) = _U32.unpack_from(buf, pos)
    namespace, pos = _cstring(buf, pos + 4)
    name, pos = _cstring(buf, pos)
    identity = chr(buf[pos])
    if identity not in REPLICA_IDENTITY_CODES:
        raise ProtocolError(f"relation {namespace}.{name}: unknown replica identity {identity!r}")
    (count,) = _I16.unpack_from(buf, pos + 1)
    if count < 0:
        raise ProtocolError(f"relation {namespace}.{name}: negative column count {count}")
    pos += 3
    columns = []
    for _ in range(count):
        flags = buf[pos]
        column_name, pos = _cstring(buf, pos + 1)
        type_oid, type_modifier = _COLUMN_TAIL.unpack_from(buf, pos)
        pos += 8
        columns.append(RelationColumn(flags, column_name, type_oid, type_modifier))
    return Relation(relation_id, namespace, name, identity, tuple(columns))


def _type(buf: bytes, pos: int) -> TypeMessage:
    (type_oid,) = _U32.unpack_from(buf, pos)
    namespace, pos = _cstring(buf, pos + 4)
    name, _ = _cstring(buf, pos)
    return TypeMessage(type_oid, namespace, name)


def _insert(buf: Buffer, pos: int) -> Insert:
    (relation_id,) = _U32.unpack_from(buf, pos)
    if buf[pos + 4] != 0x4E:  # 'N'
        raise ProtocolError(f"insert into relation {relation_id}: expected 'N' before the new tuple")
    return Insert(relation_id, bytes(buf[pos + 5 :]))


def _update(buf: Buffer, pos: int) -> Update:
    (relation_id,) = _U32.unpack_from(buf, pos)
    pos += 4
    marker = buf[pos]
    old, key_only = b"", False
    if marker == 0x4B or marker == 0x4F:  # 'K' key only, 'O' full old row
        end = _tuple_end(buf, pos + 1)
        old, key_only = bytes(buf[pos + 1 : end]), marker == 0x4B
        pos = end
        marker = buf[pos]
    if marker != 0x4E:
        raise ProtocolError(f"update of relation {relation_id}: expected 'N' before the new tuple")
    return Update(relation_id, old, key_only, bytes(buf[pos + 1 :]))


def _delete(buf: Buffer, pos: int) -> Delete:
    (relation_id,) = _U32.unpack_from(buf, pos)
    marker = buf[pos + 4]
    if marker != 0x4B and marker != 0x4F:
        raise ProtocolError(f"delete from relation {relation_id}: expected 'K' or 'O' before the old tuple")
    return Delete(relation_id, bytes(buf[pos + 5 :]), marker == 0x4B)


def _truncate(buf: Buffer, pos: int) -> Truncate:
    count, options = _TRUNCATE_HEAD.unpack_from(buf, pos)
    if count < 0:
        raise ProtocolError(f"truncate: negative relation count {count}")
    pos += 5
    if pos + 4 * count > len(buf):
        raise ProtocolError(f"truncate: {count} relations announced, {(len(buf) - pos) // 4} present")
    return Truncate(options, struct.unpack_from(f"!{count}I", buf, pos))


def _logical_message(buf: bytes, pos: int) -> LogicalMessage:
    flags, lsn = _MESSAGE_HEAD.unpack_from(buf, pos)
    prefix, pos = _cstring(buf, pos + 9)
    (length,) = _I32.unpack_from(buf, pos)
    start = pos + 4
    if length < 0 or start + length > len(buf):
        raise ProtocolError(f"logical message {prefix!r}: content of {length} bytes does not fit")
    return LogicalMessage(bool(flags & 1), lsn, prefix, bytes(buf[start : start + length]))


def _stream_start(buf: Buffer, pos: int) -> StreamStart:
    xid, first = _STREAM_START.unpack_from(buf, pos)
    return StreamStart(xid, first == 1)


def _stream_stop(buf: Buffer, pos: int) -> StreamStop:
    if pos != len(buf):
        raise ProtocolError(f"stream stop with {len(buf) - pos} unexpected bytes")
    return StreamStop()


def _stream_commit(buf: Buffer, pos: int) -> StreamCommit:
    return StreamCommit(*_STREAM_COMMIT.unpack_from(buf, pos))


def _stream_abort(buf: Buffer, pos: int) -> StreamAbort:
    return StreamAbort(*_STREAM_ABORT.unpack_from(buf, pos))


def _cstring(buf: bytes, pos: int) -> tuple[str, int]:
    """A NUL-terminated UTF-8 string at pos, and the position after its NUL."""
    end = buf.find(b"\0", pos)
    if end < 0:
        raise ProtocolError(f"unterminated string at byte {pos}")
    return buf[pos:end].decode("utf-8"), end + 1


def _tuple_end(buf: Buffer, pos: int) -> int:
    """Walk one TupleData without decoding its values; return the offset just past it."""
    (count,) = _I16.unpack_from(buf, pos)
    if count < 0:
        raise ProtocolError(f"corrupt tuple: negative column count {count} at byte {pos}")
    pos += 2
    size = len(buf)
    for column in range(count):
        kind = buf[pos]
        if kind == 0x74 or kind == 0x62:  # 't' text, 'b' binary
            (length,) = _I32.unpack_from(buf, pos + 1)
            pos += 5 + length
            if length < 0 or pos > size:
                raise ProtocolError(f"corrupt tuple: column {column} claims {length} bytes")
        elif kind == 0x6E or kind == 0x75:  # 'n' null, 'u' unchanged TOAST
            pos += 1
        else:
            raise ProtocolError(f"corrupt tuple: unknown column kind {kind:#04x} for column {column}")
    return pos


_DECODERS: dict[int, Callable[[Buffer, int], PgOutputMessage]] = {  # type: ignore[dict-item]
    ord("B"): _begin,
    ord("C"): _commit,
    ord("O"): _origin,
    ord("R"): _relation,
    ord("Y"): _type,
    ord("I"): _insert,
    ord("U"): _update,
    ord("D"): _delete,
    ord("T"): _truncate,
    ord("M"): _logical_message,
    ord("S"): _stream_start,
    ord("E"): _stream_stop,
    ord("c"): _stream_commit,
    ord("A"): _stream_abort,
}
#: Decoders that read the frame in place (no copy): row changes, Begin and Commit, the hot path.
_IN_PLACE_DECODERS = frozenset({_insert, _update, _delete, _begin, _commit})
