"""pgoutput message types (protocol versions 1 and 2), as created by the decoder in pgoutput.py."""

from __future__ import annotations

from typing import NamedTuple


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


class StreamStart(NamedTuple):
    xid: int
    first_segment: bool


class StreamStop(NamedTuple):
    pass


class StreamCommit(NamedTuple):
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time_pg_us: int


class StreamAbort(NamedTuple):
    xid: int  # the top-level transaction
    subxid: int  # == xid when the whole transaction aborted, else the aborted subtransaction


PgOutputMessage = (
    Begin | Commit | Origin | Relation | TypeMessage | Insert | Update | Delete | Truncate | LogicalMessage
    | StreamStart | StreamStop | StreamCommit | StreamAbort
)
