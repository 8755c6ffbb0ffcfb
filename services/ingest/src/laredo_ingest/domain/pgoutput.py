"""pgoutput (protocol version 1) message decoder: bytes in, message tuples out, ProtocolError on anything else.

Row-change messages are the hot path: their tuples are kept as the raw TupleData
bytes the stream forwards unchanged (laredo_core.tuples), so an Insert costs one
unpack and one slice. Messages are NamedTuples because they are created once per
change; everything here is pure and allocation-aware.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from laredo_core.errors import ProtocolError

_U32 = struct.Struct("!I")
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_BEGIN = struct.Struct("!QqI")
_COMMIT = struct.Struct("!BQQq")
_COLUMN_TAIL = struct.Struct("!Ii")
_MESSAGE_HEAD = struct.Struct("!BQ")
_TRUNCATE_HEAD = struct.Struct("!iB")

REPLICA_IDENTITY_CODES = frozenset("dnfi")


class Begin(NamedTuple):
    final_lsn: int  # LSN of the commit record: the transaction's commit_lsn
    commit_time_pg_us: int  # microseconds since 2000-01-01 UTC
    xid: int


class Commit(NamedTuple):
    flags: int
    commit_lsn: int
    end_lsn: int  # end of the commit record: what a consumer confirms
    commit_time_pg_us: int


class Origin(NamedTuple):
    origin_lsn: int
    name: str


class RelationColumn(NamedTuple):
    flags: int  # bit 0: part of the replica identity key
    name: str
    type_oid: int
    type_modifier: int

    @property
    def is_key(self) -> bool:
        return bool(self.flags & 1)


class Relation(NamedTuple):
    relation_id: int
    namespace: str
    name: str
    replica_identity: str  # 'd' default, 'n' nothing, 'f' full, 'i' index
    columns: tuple[RelationColumn, ...]


class TypeMessage(NamedTuple):
    type_oid: int
    namespace: str
    name: str


class Insert(NamedTuple):
    relation_id: int
    new_tuple: bytes


class Update(NamedTuple):
    relation_id: int
    old_tuple: bytes  # b"" when the server sent no old values
    old_is_key_only: bool
    new_tuple: bytes


class Delete(NamedTuple):
    relation_id: int
    old_tuple: bytes
    old_is_key_only: bool


class Truncate(NamedTuple):
    options: int  # bit 0: CASCADE, bit 1: RESTART IDENTITY
    relation_ids: tuple[int, ...]


class LogicalMessage(NamedTuple):
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


PgOutputMessage = (
    Begin | Commit | Origin | Relation | TypeMessage | Insert | Update | Delete | Truncate | LogicalMessage
)
Buffer = bytes | bytearray | memoryview


def decode_message(buf: Buffer, offset: int = 0) -> PgOutputMessage:
    """Decode the pgoutput message starting at `offset` and running to the end of `buf`."""
    if offset >= len(buf):
        raise ProtocolError(f"empty pgoutput message at byte {offset}")
    decoder = _DECODERS.get(buf[offset])
    if decoder is None:
        raise ProtocolError(
            f"unknown pgoutput message type {buf[offset]:#04x} at byte {offset} "
            "(only protocol version 1 without streaming is supported)"
        )
    if decoder not in _ROW_CHANGE_DECODERS:
        # The other messages are few per transaction; a bytes copy lets their string parsing use bytes.find.
        buf, offset = bytes(buf[offset:]), 0
    try:
        return decoder(buf, offset + 1)
    except (struct.error, IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
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
}
_ROW_CHANGE_DECODERS = frozenset({_insert, _update, _delete})
