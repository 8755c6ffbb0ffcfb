"""Turn decoded pgoutput messages into stream batches: per transaction, per table, bounded chunks.

Invariants:
- Changes of a transaction get ordinals 0, 1, 2, ... in transaction order, counted across tables.
- A table's changes in one transaction go out as chunks 0..n of at most `max_changes` changes and
  `max_bytes` bytes, and never more than the transport's max_payload allows (message_limits.py); the chunk
  of a table is emitted when the next change of that table would overflow it, so a big transaction is never
  held in memory, and chunking is deterministic: a replay of the same transaction yields the same chunks and
  therefore the same message ids.
- A change too large for max_payload even alone is not put in a chunk: it goes out at once as a dead letter
  (oversized_dead_letter) and `on_oversized` is told; its ordinal is used up like any other.
- A Relation message that changes a table's columns (names, types, key flags, replica identity) sends the
  table's open chunk at once (it keeps the columns its tuples follow), then a SCHEMA_CHANGE message with
  the old and the new columns; later changes start a new chunk. The first Relation of a session is
  compared with the catalog read at start-up.
- A table without a usable key (schema.has_usable_key) goes to its dead-letter subject, not its table
  subject: consumers cannot apply its changes, operators can still read them.
- With REPLICA IDENTITY FULL an update's unchanged TOASTed values are filled in from the old row, which
  the server sends whole; with other identities they stay UNCHANGED and consumers keep their value.
- skip_before(table, lsn): changes of that table in transactions committed before lsn are dropped (they
  are part of a re-baseline taken at lsn); they still take ordinals, so the other tables' messages are
  the same as without the skip.
- At Commit every open chunk goes out marked last_chunk (in order of their first change), and the very
  last message of the transaction carries the commit's end_lsn: once it and everything before it is
  acknowledged, the whole transaction is published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from laredo_kernel.changes import Action, BatchKind, TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.stream.naming import control_msg_id, deadletter_subject, table_subject, transaction_msg_id

from laredo_ingest.domain.batches import CHANGE_OVERHEAD_BYTES, ChangeRecord, OutboundBatch
from laredo_ingest.domain.message_limits import MessageLimits, OversizedMessage, TableLimits, oversized_dead_letter
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
from laredo_ingest.domain.toast import fill_unchanged_from_old
from laredo_ingest.domain.walproto import pg_time_to_unix_us

NO_BATCHES: Sequence[OutboundBatch] = ()
_new_record = tuple.__new__


@dataclass(slots=True)
class _OpenChunk:
    schema: TableSchema
    index: int
    limits: TableLimits
    changes: list[ChangeRecord] = field(default_factory=list)
    size: int = 0


@dataclass(slots=True)
class _Transaction:
    commit_lsn: int
    xid: int
    commit_time_unix_us: int
    next_ordinal: int = 0
    open_chunks: dict[int, _OpenChunk] = field(default_factory=dict)  # by relation id
    next_chunk: dict[int, int] = field(default_factory=dict)  # by relation id, after a chunk left early
    skipped: frozenset[TableId] = frozenset()


class TransactionAssembler:
    """Feed it every pgoutput message of one replication session, in order; it returns batches to publish."""

    def __init__(self, source_id: str, subject_prefix: str, tables: Mapping[TableId, TableSchema], *,
                 max_changes: int, max_bytes: int, max_payload: int = 0,
                 on_oversized: Callable[[OutboundBatch], None] | None = None) -> None:
        self._source_id = source_id
        self._prefix = subject_prefix
        self._catalog = dict(tables)
        self._max_changes = max_changes
        self._limits = MessageLimits(max_bytes, max_payload)
        self._table_limits: dict[int, tuple[TableSchema, TableLimits]] = {}  # by relation id
        self._on_oversized = on_oversized
        self._relations: dict[int, TableSchema | None] = {}  # None: not configured, changes are skipped
        self._known: dict[TableId, TableSchema] = dict(tables)  # last schema seen per table
        self._type_names: dict[int, str] = {}
        self._subjects: dict[tuple[TableId, bool], str] = {}
        self._skip_before: dict[TableId, int] = {}
        self._txn: _Transaction | None = None
        self._handlers: dict[type, Callable[..., Sequence[OutboundBatch]]] = {
            Begin: self._begin, Commit: self._commit, Relation: self._relation, TypeMessage: self._type,
            Insert: self._insert, Update: self._update, Delete: self._delete, Truncate: self._truncate,
            Origin: self._ignore, LogicalMessage: self._ignore,
        }

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    def catalog_lacks(self, msg: Relation) -> bool:
        """True when a configured table's Relation names a column the catalog does not describe (added or
        retyped): the catalog facts (not null, key, base type) should be refreshed before it is fed."""
        catalog = self._catalog.get(TableId(msg.namespace, msg.name))
        if catalog is None:
            return False
        known = {(c.name, c.type_oid) for c in catalog.columns}
        return any((c.name, c.type_oid) not in known for c in msg.columns)

    def update_catalog(self, schema: TableSchema) -> None:
        if schema.table in self._catalog:
            self._catalog[schema.table] = schema

    def skip_before(self, table: TableId, lsn: int) -> None:
        self._skip_before[table] = lsn
        if self._txn is not None and self._txn.commit_lsn < lsn:
            self._txn.skipped = self._txn.skipped | {table}

    def feed(self, message: PgOutputMessage) -> Sequence[OutboundBatch]:
        return self._handlers[type(message)](message)

    def add_insert(self, relation_id: int, new_tuple: bytes) -> Sequence[OutboundBatch]:
        """feed(Insert(...)) without building the message: the hot path."""
        return self._add(relation_id, Action.INSERT, b"", new_tuple, False)

    def add_row_change(self, message: Update | Delete) -> Sequence[OutboundBatch]:
        return self._update(message) if type(message) is Update else self._delete(message)  # type: ignore[arg-type]

    def _begin(self, msg: Begin) -> Sequence[OutboundBatch]:
        if self._txn is not None:
            raise ProtocolError(f"Begin of xid {msg.xid} while xid {self._txn.xid} is still open")
        self._txn = _Transaction(msg.final_lsn, msg.xid, pg_time_to_unix_us(msg.commit_time_pg_us))
        if self._skip_before:
            self._txn.skipped = frozenset(t for t, lsn in self._skip_before.items() if msg.final_lsn < lsn)
        return NO_BATCHES

    def _commit(self, msg: Commit) -> Sequence[OutboundBatch]:
        txn = self._txn
        if txn is None:
            raise ProtocolError("Commit without a preceding Begin")
        if msg.commit_lsn != txn.commit_lsn:
            raise ProtocolError(f"Commit at {msg.commit_lsn:#x} does not match Begin's {txn.commit_lsn:#x}")
        self._txn = None
        if not txn.open_chunks:
            return NO_BATCHES
        if len(txn.open_chunks) == 1:
            [chunk] = txn.open_chunks.values()
            return [self._batch(txn, chunk, last_chunk=True, end_lsn=msg.end_lsn)]
        chunks = sorted(txn.open_chunks.values(), key=lambda c: c.changes[0].ordinal)
        last = len(chunks) - 1
        return [self._batch(txn, c, last_chunk=True, end_lsn=msg.end_lsn if i == last else 0)
                for i, c in enumerate(chunks)]

    def _relation(self, msg: Relation) -> Sequence[OutboundBatch]:
        table = TableId(msg.namespace, msg.name)
        catalog = self._catalog.get(table)
        if catalog is None:
            self._relations[msg.relation_id] = None
            return NO_BATCHES
        schema = schema_from_relation(msg, catalog, self._type_names)
        self._relations[msg.relation_id] = schema
        previous = self._known.get(table)
        self._known[table] = schema
        txn = self._txn
        if txn is None or previous is None or previous.signature == schema.signature:
            return NO_BATCHES
        emitted: list[OutboundBatch] = []
        chunk = txn.open_chunks.pop(msg.relation_id, None)
        if chunk is not None:  # its changes follow the old columns: send them before the event
            emitted.append(self._batch(txn, chunk, last_chunk=False, end_lsn=0))
            txn.next_chunk[msg.relation_id] = chunk.index + 1
        emitted.append(self._schema_change(txn, previous, schema))
        return emitted

    def _schema_change(self, txn: _Transaction, previous: TableSchema, schema: TableSchema) -> OutboundBatch:
        old_names, new_names = [c.name for c in previous.columns], [c.name for c in schema.columns]
        added = [n for n in new_names if n not in old_names]
        dropped = [n for n in old_names if n not in new_names]
        reason = "; ".join(part for part in (
            f"added {', '.join(added)}" if added else "", f"dropped {', '.join(dropped)}" if dropped else "",
            "column types, key or replica identity changed" if not (added or dropped) else "") if part)
        return OutboundBatch(
            subject=self._subject(schema), msg_id=control_msg_id(
                self._source_id, "schema", txn.commit_lsn, schema.table, str(txn.next_ordinal)),
            source_id=self._source_id, kind=BatchKind.SCHEMA_CHANGE, schema=schema, commit_lsn=txn.commit_lsn,
            xid=txn.xid, commit_time_unix_us=txn.commit_time_unix_us, old_columns=previous.columns,
            reason=reason)

    def _type(self, msg: TypeMessage) -> Sequence[OutboundBatch]:
        self._type_names[msg.type_oid] = msg.name
        return NO_BATCHES

    def _ignore(self, _: PgOutputMessage) -> Sequence[OutboundBatch]:
        return NO_BATCHES

    def _insert(self, msg: Insert) -> Sequence[OutboundBatch]:
        return self._add(msg.relation_id, Action.INSERT, b"", msg.new_tuple, False)

    def _update(self, msg: Update) -> Sequence[OutboundBatch]:
        new = msg.new_tuple
        if msg.old_tuple and not msg.old_is_key_only:  # REPLICA IDENTITY FULL: the old row is complete
            new = fill_unchanged_from_old(new, msg.old_tuple)
        return self._add(msg.relation_id, Action.UPDATE, msg.old_tuple, new, msg.old_is_key_only)

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
        ordinal = txn.next_ordinal
        txn.next_ordinal = ordinal + 1
        if txn.skipped and schema.table in txn.skipped:
            return NO_BATCHES
        record = _new_record(ChangeRecord, (action, ordinal, old, new, key_only))  # NamedTuple, minus its __new__
        size = len(old) + len(new) + CHANGE_OVERHEAD_BYTES
        emitted = NO_BATCHES
        chunk = txn.open_chunks.get(relation_id)
        limits = chunk.limits if chunk is not None else self._limits_of(relation_id, schema)
        if limits.oversized(size):
            return [self._oversized(txn, schema, record)]
        if chunk is None:
            chunk = txn.open_chunks[relation_id] = _OpenChunk(schema, txn.next_chunk.get(relation_id, 0), limits)
        elif len(chunk.changes) >= self._max_changes or limits.overflows(len(chunk.changes), chunk.size, size):
            emitted = [self._batch(txn, chunk, last_chunk=False, end_lsn=0)]
            chunk = txn.open_chunks[relation_id] = _OpenChunk(schema, chunk.index + 1, limits)
        chunk.changes.append(record)
        chunk.size += size
        return emitted

    def _limits_of(self, relation_id: int, schema: TableSchema) -> TableLimits:
        cached = self._table_limits.get(relation_id)
        if cached is not None and cached[0] is schema:
            return cached[1]
        limits = self._limits.for_table(schema)
        self._table_limits[relation_id] = (schema, limits)
        return limits

    def _oversized(self, txn: _Transaction, schema: TableSchema, record: ChangeRecord) -> OutboundBatch:
        where = OversizedMessage(self._source_id, self._prefix, BatchKind.TRANSACTION, txn.commit_lsn, txn.xid,
                                 txn.commit_time_unix_us)
        letter = oversized_dead_letter(where, schema, record, self._limits)
        if self._on_oversized is not None:
            self._on_oversized(letter)
        return letter

    def _subject(self, schema: TableSchema) -> str:
        key = (schema.table, schema.has_usable_key)
        subject = self._subjects.get(key)
        if subject is None:
            make = table_subject if schema.has_usable_key else deadletter_subject
            subject = self._subjects[key] = make(self._prefix, self._source_id, schema.table)
        return subject

    def _batch(self, txn: _Transaction, chunk: _OpenChunk, *, last_chunk: bool, end_lsn: int) -> OutboundBatch:
        table = chunk.schema.table
        return OutboundBatch(
            subject=self._subject(chunk.schema),
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
