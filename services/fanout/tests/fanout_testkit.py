"""Test helpers for the fan-out service: ChangeBatch messages as ingest publishes them, and a Sync replica."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.json_format import MessageToDict

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_core.changes import ColumnInfo, TableId
from laredo_core.position import BASELINE_ORDINAL_BASE
from laredo_core.stream.codec import columns_to_proto
from laredo_core.tuples import UNCHANGED, encode_tuple

TABLE = TableId("public", "items")
SOURCE = "pg"
COLUMNS = (
    ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text"),
    ColumnInfo("doc", 25, "text"),
)


def raw(value: Any) -> Any:
    """A typed test value as pgoutput text form (None, UNCHANGED kept)."""
    if value is None or value is UNCHANGED:
        return value
    return str(value).encode()


def tuple_of(row: Mapping[str, Any], columns: Sequence[ColumnInfo] = COLUMNS, *, key_only: bool = False) -> bytes:
    return encode_tuple([
        raw(row.get(c.name)) if (not key_only or c.is_identity_key) else None for c in columns
    ])


@dataclass
class Batches:
    """Builds serialized ChangeBatch messages for one table; LSNs grow on every transaction."""

    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS
    source_id: str = SOURCE
    lsn: int = 0x1000000
    xid: int = 700
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def _batch(self, kind: int, **fields: Any) -> spb.ChangeBatch:
        return spb.ChangeBatch(
            source_id=self.source_id, kind=kind,
            table=spb.TableRef(schema=self.table.schema, name=self.table.name, relation_id=16384),
            columns=columns_to_proto(self.columns), replica_identity=spb.REPLICA_IDENTITY_DEFAULT, **fields)

    def baseline(self, rows: Sequence[Mapping[str, Any]], *, chunk_rows: int = 100) -> list[bytes]:
        self.lsn += 0x100
        baseline_id = f"bl{next(self._ids)}"
        common = {"commit_lsn": self.lsn, "baseline_id": baseline_id}
        out = [self._batch(spb.BATCH_KIND_BASELINE_BEGIN, **common).SerializeToString()]
        for chunk, start in enumerate(range(0, len(rows), chunk_rows)):
            changes = [spb.Change(action=spb.ACTION_INSERT, ordinal=BASELINE_ORDINAL_BASE + start + i,
                                  new_tuple=tuple_of(row, self.columns))
                       for i, row in enumerate(rows[start:start + chunk_rows])]
            out.append(self._batch(spb.BATCH_KIND_BASELINE_ROWS, chunk=chunk, changes=changes,
                                   **common).SerializeToString())
        out.append(self._batch(spb.BATCH_KIND_BASELINE_END, baseline_row_count=len(rows), last_chunk=True,
                               **common).SerializeToString())
        return out

    def transaction(self, *changes: spb.Change, commit_time_unix_us: int = 1_700_000_000_000_000) -> bytes:
        self.lsn += 0x100
        self.xid += 1
        for ordinal, change in enumerate(changes):
            change.ordinal = ordinal
        return self._batch(spb.BATCH_KIND_TRANSACTION, commit_lsn=self.lsn, end_lsn=self.lsn + 0x30, xid=self.xid,
                           commit_time_unix_us=commit_time_unix_us, last_chunk=True,
                           changes=list(changes)).SerializeToString()


def insert(row: Mapping[str, Any]) -> spb.Change:
    return spb.Change(action=spb.ACTION_INSERT, new_tuple=tuple_of(row))


def update(row: Mapping[str, Any], old_key: Mapping[str, Any] | None = None) -> spb.Change:
    change = spb.Change(action=spb.ACTION_UPDATE, new_tuple=tuple_of(row))
    if old_key is not None:
        change.old_tuple, change.old_is_key_only = tuple_of(old_key, key_only=True), True
    return change


def delete(key: Mapping[str, Any]) -> spb.Change:
    return spb.Change(action=spb.ACTION_DELETE, old_tuple=tuple_of(key, key_only=True), old_is_key_only=True)


def truncate() -> spb.Change:
    return spb.Change(action=spb.ACTION_TRUNCATE)


def row(i: int, name: str | None = None, doc: str | None = "d") -> dict[str, Any]:
    return {"id": i, "name": name if name is not None else f"n{i}", "doc": doc}


class SyncReplica:
    """Applies SyncResponse messages the way a client does, checking the stream's grammar on the way.

    Sequences must follow each other without a gap, or (filtered clients: `gaps_allowed`) at least increase.
    Without `track_rows` only the grammar and sequences are checked (a cheap client for load tests).
    """

    def __init__(self, *, gaps_allowed: bool = False, track_rows: bool = True) -> None:
        self.gaps_allowed = gaps_allowed
        self.track_rows = track_rows
        self.go_away: rpb.GoAway | None = None
        self.schema_changes: list[rpb.SchemaChangeNotification] = []
        self.rows: dict[Any, dict[str, Any]] = {}
        self.messages: list[rpb.SyncResponse] = []
        self.sequences: list[int] = []
        self.handshake: rpb.SyncHandshake | None = None
        self.snapshot_rows = 0
        self.heartbeats = 0
        self.snapshot_done = False
        self.batched_messages = 0

    def apply_bytes(self, data: bytes) -> rpb.SyncResponse:
        message = rpb.SyncResponse.FromString(data)
        self.apply(message)
        return message

    def apply(self, message: rpb.SyncResponse) -> None:
        self.messages.append(message)
        which = message.WhichOneof("message")
        assert (which == "handshake") == (self.handshake is None), f"handshake must come first, got {which}"
        if which == "handshake":
            self.handshake = message.handshake
        elif which == "snapshot_row":
            self._snapshot_row(message.snapshot_row)
        elif which == "snapshot_rows":
            self.batched_messages += 1
            for r in message.snapshot_rows.rows:
                self._snapshot_row(r)
        elif which == "snapshot_end":
            assert message.snapshot_end.rows_sent == self.snapshot_rows
            self.snapshot_done = True
        elif which == "journal_entry":
            self._entry(message.journal_entry)
        elif which == "journal_batch":
            self.batched_messages += 1
            for e in message.journal_batch.entries:
                self._entry(e)
        elif which == "heartbeat":
            self.heartbeats += 1
        elif which == "go_away":
            self.go_away = message.go_away
        elif which == "schema_change":
            self.schema_changes.append(message.schema_change)

    def _snapshot_row(self, snapshot_row: rpb.SnapshotRow) -> None:
        self.snapshot_rows += 1
        if self.track_rows:
            values = MessageToDict(snapshot_row.row)
            self.rows[values["id"]] = values

    def _entry(self, entry: rpb.ReplicationJournalEntry) -> None:
        assert self.handshake is not None
        previous = self.sequences[-1] if self.sequences else self.handshake.resume_from_sequence
        if self.gaps_allowed:
            assert entry.sequence > previous, f"sequence going back: {previous} then {entry.sequence}"
        else:
            assert entry.sequence == previous + 1, f"gap or duplicate: {previous} then {entry.sequence}"
        self.sequences.append(entry.sequence)
        if not self.track_rows:
            return
        old = MessageToDict(entry.old_values) if entry.HasField("old_values") else None
        new = MessageToDict(entry.new_values) if entry.HasField("new_values") else None
        if entry.action == "TRUNCATE":
            self.rows.clear()
        elif entry.action == "DELETE":
            assert old is not None
            self.rows.pop(old["id"], None)
        else:
            if old is not None and old["id"] != new["id"]:
                self.rows.pop(old["id"], None)
            self.rows[new["id"]] = new


def as_client_rows(rows: Sequence[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Typed rows as a client sees them after Struct (numbers are doubles)."""
    out = {}
    for r in rows:
        values = {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in r.items()}
        out[values["id"]] = values
    return out
