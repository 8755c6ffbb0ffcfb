"""Test helper: read an ingest stream from JetStream and fold it into tables the way a consumer does.

The fold follows the stream contract (proto/laredo/stream/v1/change_stream.proto) and the fan-out's rules:
positions are the idempotency key (a change at or before the table's applied position is skipped),
BASELINE_BEGIN starts a generation whose END removes the rows it did not contain, an UNCHANGED value keeps
the stored one, an update whose old key differs moves the row, TRUNCATE empties the table.
`table_rows` reads the table itself through the same text forms and codec, so "the replica equals the
table" compares typed values produced the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import nats
import psycopg
from nats.js.api import DeliverPolicy

from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, ColumnInfo, TableId
from laredo_kernel.errors import ProtocolError
from laredo_kernel.position import BASELINE_ORDINAL_BASE, ZERO, Position
from laredo_core.stream.codec import decode_batch, typed_row
from laredo_core.stream.naming import source_subject_filter, stream_name
from laredo_kernel.tuples import UNCHANGED, decode_tuple_exact, encode_tuple

from laredo_ingest.adapters.pg_connection import session_conninfo


@dataclass(frozen=True)
class StreamMessage:
    seq: int
    subject: str
    headers: dict[str, str]
    batch: ChangeBatchInfo


async def read_stream(nats_url: str, prefix: str, source_id: str = "main") -> list[StreamMessage]:
    """Every message of the source's stream, in stream order (an ordered consumer: fast for big streams)."""
    client = await nats.connect(nats_url)
    try:
        js = client.jetstream()
        name = stream_name(prefix, source_id)
        last = (await js.stream_info(name)).state.last_seq
        messages: list[StreamMessage] = []
        if last == 0:
            return messages
        sub = await js.subscribe(source_subject_filter(prefix, source_id), ordered_consumer=True,
                                 deliver_policy=DeliverPolicy.ALL)
        try:
            while True:
                msg = await sub.next_msg(timeout=10)
                seq = msg.metadata.sequence.stream
                with contextlib.suppress(ProtocolError):  # another client's bytes: consumers dead-letter them
                    messages.append(StreamMessage(seq, msg.subject, dict(msg.headers or {}), decode_batch(msg.data)))
                if seq >= last:
                    return messages
        finally:
            await sub.unsubscribe()
    finally:
        await client.close()


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


@dataclass
class ReplicaTable:
    columns: tuple[ColumnInfo, ...] = ()
    key: tuple[str, ...] = ()
    rows: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    applied: Position = ZERO
    generation: str | None = None
    seen: set[tuple[Any, ...]] = field(default_factory=set)
    baselines: int = 0
    schema_changes: list[ChangeBatchInfo] = field(default_factory=list)
    resyncs: list[ChangeBatchInfo] = field(default_factory=list)

    def key_of(self, values: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_hashable(values[c]) for c in (self.key or tuple(values)))


class StreamReplica:
    """Tables folded from stream messages (only table subjects; dead-letter messages are kept apart)."""

    def __init__(self, messages: Iterable[StreamMessage] = ()) -> None:
        self.tables: dict[TableId, ReplicaTable] = {}
        self.deadletter: list[StreamMessage] = []
        for message in messages:
            self.apply(message)

    def rows(self, table: TableId) -> dict[tuple[Any, ...], dict[str, Any]]:
        return self.tables.get(table, ReplicaTable()).rows

    def apply(self, message: StreamMessage) -> None:
        if ".deadletter." in message.subject:
            self.deadletter.append(message)
            return
        batch = message.batch
        table = self.tables.setdefault(batch.table, ReplicaTable())
        if batch.columns and batch.columns != table.columns:
            table.columns, table.key = batch.columns, batch.key_columns
            table.rows = {table.key_of(r): r for r in table.rows.values()}
        kind = batch.kind
        if kind is BatchKind.BASELINE_BEGIN:
            self._accept(table, Position(batch.commit_lsn, BASELINE_ORDINAL_BASE - 1),
                         lambda: self._begin(table, batch))
        elif kind is BatchKind.BASELINE_END:
            self._accept(table, Position(batch.commit_lsn, -1), lambda: self._end(table, batch))
        elif kind is BatchKind.SCHEMA_CHANGE:
            table.schema_changes.append(batch)
        elif kind is BatchKind.RESYNC_REQUIRED:
            table.resyncs.append(batch)
        else:
            for change in batch.changes:
                self._accept(table, change.position, lambda change=change: self._change(table, batch, change))

    @staticmethod
    def _accept(table: ReplicaTable, position: Position, apply: Any) -> None:
        if position > table.applied:
            apply()
            table.applied = position

    @staticmethod
    def _begin(table: ReplicaTable, batch: ChangeBatchInfo) -> None:
        table.generation, table.seen = batch.baseline_id, set()

    @staticmethod
    def _end(table: ReplicaTable, batch: ChangeBatchInfo) -> None:
        if batch.baseline_id != table.generation:
            table.seen = set()
        table.rows = {k: v for k, v in table.rows.items() if k in table.seen}
        table.generation, table.seen = None, set()
        table.baselines += 1

    def _change(self, table: ReplicaTable, batch: ChangeBatchInfo, change: Any) -> None:
        if change.action is Action.TRUNCATE:
            table.rows = {}
            return
        if change.action is Action.DELETE:
            table.rows.pop(self._find(table, change.old), None)
            return
        old_key = self._find(table, change.old) if change.old else None
        previous = table.rows.get(old_key) if old_key is not None else None
        if previous is None and all(change.new.get(c) is not UNCHANGED for c in table.key):
            previous = table.rows.get(table.key_of(change.new)) if table.key else None
        values = {k: (previous[k] if v is UNCHANGED else v) for k, v in change.new.items()
                  if v is not UNCHANGED or (previous is not None and k in previous)}
        new_key = table.key_of(values)
        if old_key is not None and old_key != new_key:
            table.rows.pop(old_key, None)
        table.rows[new_key] = values
        if batch.kind is BatchKind.BASELINE_ROWS:
            table.seen.add(new_key)

    @staticmethod
    def _find(table: ReplicaTable, partial: dict[str, Any] | None) -> tuple[Any, ...] | None:
        if partial is None:
            return None
        if table.key and all(c in partial for c in table.key):
            return table.key_of(partial)
        for key, row in table.rows.items():  # full old row (REPLICA IDENTITY FULL without a key column list)
            if all(row.get(k) == v for k, v in partial.items()):
                return key
        return None


async def table_rows(dsn: str, table: TableId, columns: tuple[ColumnInfo, ...], key: tuple[str, ...],
                     where: str = "") -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table's rows as typed by the stream's codec (same session settings, same text forms)."""
    names = ", ".join(f'"{c.name}"' for c in columns)
    query = f'COPY (SELECT {names} FROM "{table.schema}"."{table.name}"{" WHERE " + where if where else ""}) TO STDOUT'
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    async with await psycopg.AsyncConnection.connect(session_conninfo(dsn), autocommit=True) as conn:
        async with conn.cursor().copy(query) as copy:
            async for raw in copy.rows():
                values = typed_row(columns, decode_tuple_exact(encode_tuple(
                    [None if v is None else v.encode() for v in raw])))
                rows[tuple(_hashable(values[c]) for c in (key or tuple(values)))] = values
    return rows


async def assert_replica_equals_table(nats_url: str, prefix: str, dsn: str, table: TableId,
                                      where: str = "") -> StreamReplica:
    """Fold the whole stream; the table's replica must equal the table (the rows matching `where`)."""
    replica = StreamReplica(await read_stream(nats_url, prefix))
    state = replica.tables[table]
    expected = await table_rows(dsn, table, state.columns, state.key, where)
    assert state.rows == expected, _difference(state.rows, expected)
    return replica


def _difference(got: dict, expected: dict) -> str:
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    changed = [k for k in expected if k in got and got[k] != expected[k]]
    return (f"replica differs from the table: {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
            f"{len(changed)} changed, e.g. " + "; ".join(
                f"{k}: " + ", ".join(f"{c}={got[k].get(c)!r} != {v!r}" for c, v in expected[k].items()
                                     if got[k].get(c) != v)[:500] for k in changed[:3]))
