"""Test helpers for the fan-out service: ChangeBatch messages as ingest publishes them, and a Sync replica."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.json_format import MessageToDict
from laredo_testing import stream
from laredo_testing.stream import truncate as truncate

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_kernel.changes import ColumnInfo, TableId

TABLE = TableId("public", "items")
SOURCE = "pg"
COLUMNS = (
    ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text"),
    ColumnInfo("doc", 25, "text"),
)


def tuple_of(row: Mapping[str, Any], columns: Sequence[ColumnInfo] = COLUMNS, *, key_only: bool = False) -> bytes:
    return stream.tuple_of(row, columns, key_only=key_only)


@dataclass
class Batches(stream.Batches):
    """Serialized ChangeBatch messages for TABLE (or another table) as ingest publishes them."""

    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS


# Changes of TABLE's rows (the builders only read the columns, so one instance serves every call).
insert, update, delete = Batches().insert, Batches().update, Batches().delete


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
