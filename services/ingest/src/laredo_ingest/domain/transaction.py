"""Turn decoded pgoutput messages into stream batches: per transaction, per table, bounded chunks.

Invariants:
- Changes of a transaction get ordinals 0, 1, 2, ... in transaction order, counted across tables.
- A table's changes in one transaction go out as chunks 0..n of at most `max_changes` changes and about
  `max_bytes` bytes; the chunk of a table is emitted when the next change of that table would overflow it,
  so a big transaction is never held in memory, and chunking is deterministic: a replay of the same
  transaction yields the same chunks and therefore the same message ids.
- A Relation message that changes a table's columns mid-transaction seals the table's open chunk: the
  chunk keeps the columns its tuples follow, and later changes start a new chunk.
- At Commit every open chunk goes out marked last_chunk (in order of their first change), and the very
  last message of the transaction carries the commit's end_lsn: once it and everything before it is
  acknowledged, the whole transaction is published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from laredo_core.changes import Action, BatchKind, TableId
from laredo_core.errors import ProtocolError
from laredo_core.stream.naming import table_subject, transaction_msg_id

from laredo_ingest.domain.batches import CHANGE_OVERHEAD_BYTES, ChangeRecord, OutboundBatch
from laredo_ingest.domain.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputMessage,
    Relation,
    Truncate,
    TypeMessage,
    Update,
)
from laredo_ingest.domain.schema import TableSchema, schema_from_relation
from laredo_ingest.domain.walproto import pg_time_to_unix_us

NO_BATCHES: Sequence[OutboundBatch] = ()


@dataclass(slots=True)
class _OpenChunk:
    schema: TableSchema
    index: int
    changes: list[ChangeRecord] = field(default_factory=list)
    size: int = 0
    sealed: bool = False  # the table's columns changed: later changes go to a new chunk


@dataclass(slots=True)
class _Transaction:
    commit_lsn: int
    xid: int
    commit_time_unix_us: int
    next_ordinal: int = 0
    open_chunks: dict[int, _OpenChunk] = field(default_factory=dict)  # by relation id


class TransactionAssembler:
    """Feed it every pgoutput message of one replication session, in order; it returns batches to publish."""

    def __init__(self, source_id: str, subject_prefix: str, tables: Mapping[TableId, TableSchema], *,
                 max_changes: int, max_bytes: int) -> None:
        self._source_id = source_id
        self._prefix = subject_prefix
        self._catalog = dict(tables)
        self._max_changes = max_changes
        self._max_bytes = max_bytes
        self._relations: dict[int, TableSchema | None] = {}  # None: not configured, changes are skipped
        self._type_names: dict[int, str] = {}
        self._subjects: dict[TableId, str] = {}
        self._txn: _Transaction | None = None
        self._handlers: dict[type, Callable[..., Sequence[OutboundBatch]]] = {
            Begin: self._begin, Commit: self._commit, Relation: self._relation, TypeMessage: self._type,
            Insert: self._insert, Update: self._update, Delete: self._delete, Truncate: self._truncate,
            Origin: self._ignore, LogicalMessage: self._ignore,
        }

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    def schema_of(self, relation_id: int) -> TableSchema | None:
        return self._relations.get(relation_id)

    def feed(self, message: PgOutputMessage) -> Sequence[OutboundBatch]:
        return self._handlers[type(message)](message)

    def _begin(self, msg: Begin) -> Sequence[OutboundBatch]:
        if self._txn is not None:
            raise ProtocolError(f"Begin of xid {msg.xid} while xid {self._txn.xid} is still open")
        self._txn = _Transaction(msg.final_lsn, msg.xid, pg_time_to_unix_us(msg.commit_time_pg_us))
        return NO_BATCHES

    def _commit(self, msg: Commit) -> Sequence[OutboundBatch]:
        txn = self._require_txn("Commit")
        if msg.commit_lsn != txn.commit_lsn:
            raise ProtocolError(f"Commit at {msg.commit_lsn:#x} does not match Begin's {txn.commit_lsn:#x}")
        self._txn = None
        chunks = sorted(txn.open_chunks.values(), key=lambda c: c.changes[0].ordinal)
        last = len(chunks) - 1
        return [self._batch(txn, c, last_chunk=True, end_lsn=msg.end_lsn if i == last else 0)
                for i, c in enumerate(chunks)]

    def _relation(self, msg: Relation) -> Sequence[OutboundBatch]:
        table = TableId(msg.namespace, msg.name)
        catalog = self._catalog.get(table)
        schema = schema_from_relation(msg, catalog, self._type_names) if catalog is not None else None
        txn = self._txn
        chunk = txn.open_chunks.get(msg.relation_id) if txn is not None else None
        if chunk is not None and chunk.schema != schema:
            chunk.sealed = True  # its changes follow the old columns
        self._relations[msg.relation_id] = schema
        return NO_BATCHES

    def _type(self, msg: TypeMessage) -> Sequence[OutboundBatch]:
        self._type_names[msg.type_oid] = msg.name
        return NO_BATCHES

    def _ignore(self, _: PgOutputMessage) -> Sequence[OutboundBatch]:
        return NO_BATCHES

    def _insert(self, msg: Insert) -> Sequence[OutboundBatch]:
        return self._add(msg.relation_id, Action.INSERT, b"", msg.new_tuple, False)

    def _update(self, msg: Update) -> Sequence[OutboundBatch]:
        return self._add(msg.relation_id, Action.UPDATE, msg.old_tuple, msg.new_tuple, msg.old_is_key_only)

    def _delete(self, msg: Delete) -> Sequence[OutboundBatch]:
        return self._add(msg.relation_id, Action.DELETE, msg.old_tuple, b"", msg.old_is_key_only)

    def _truncate(self, msg: Truncate) -> Sequence[OutboundBatch]:
        emitted: list[OutboundBatch] = []
        for relation_id in msg.relation_ids:
            emitted.extend(self._add(relation_id, Action.TRUNCATE, b"", b"", False))
        return emitted

    def _add(self, relation_id: int, action: Action, old: bytes, new: bytes,
             key_only: bool) -> Sequence[OutboundBatch]:
        txn = self._txn
        if txn is None:
            raise ProtocolError(f"{action.value} on relation {relation_id} outside a transaction")
        try:
            schema = self._relations[relation_id]
        except KeyError:
            raise ProtocolError(f"{action.value} on relation {relation_id} before its Relation message") from None
        if schema is None:
            return NO_BATCHES
        record = ChangeRecord(action, txn.next_ordinal, old, new, key_only)
        size = len(old) + len(new) + CHANGE_OVERHEAD_BYTES
        txn.next_ordinal += 1
        emitted = NO_BATCHES
        chunk = txn.open_chunks.get(relation_id)
        if chunk is None:
            chunk = txn.open_chunks[relation_id] = _OpenChunk(schema, 0)
        elif chunk.sealed or len(chunk.changes) >= self._max_changes or (
                chunk.size + size > self._max_bytes):
            emitted = [self._batch(txn, chunk, last_chunk=False, end_lsn=0)]
            chunk = txn.open_chunks[relation_id] = _OpenChunk(schema, chunk.index + 1)
        chunk.changes.append(record)
        chunk.size += size
        return emitted

    def _batch(self, txn: _Transaction, chunk: _OpenChunk, *, last_chunk: bool, end_lsn: int) -> OutboundBatch:
        table = chunk.schema.table
        subject = self._subjects.get(table)
        if subject is None:
            subject = self._subjects[table] = table_subject(self._prefix, self._source_id, table)
        return OutboundBatch(
            subject=subject,
            msg_id=transaction_msg_id(self._source_id, txn.commit_lsn, table, chunk.index),
            source_id=self._source_id,
            kind=BatchKind.TRANSACTION,
            schema=chunk.schema,
            commit_lsn=txn.commit_lsn,
            end_lsn=end_lsn,
            xid=txn.xid,
            commit_time_unix_us=txn.commit_time_unix_us,
            chunk=chunk.index,
            last_chunk=last_chunk,
            changes=chunk.changes,
        )

    def _require_txn(self, what: str) -> _Transaction:
        if self._txn is None:
            raise ProtocolError(f"{what} without a preceding Begin")
        return self._txn
