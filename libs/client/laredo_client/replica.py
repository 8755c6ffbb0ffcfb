"""A minimal replica of one table over a single Sync stream: snapshot, catch-up, then live changes.

A low-level building block for tests, the demo and benchmarks; applications use LaredoClient (reconnects,
failover handoff, indexes, local snapshot). The replica applies messages idempotently by primary key, checks
that journal sequences are contiguous within a stream, and remembers the last sequence and source position so
a reconnect can resume.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from laredo.replication.v1 import replication_pb2 as pb
from laredo.replication.v1 import replication_pb2_grpc as pb_grpc

from laredo_client.errors import SequenceGapError
from laredo_client.values import Column, RowDecoder

log = logging.getLogger(__name__)

Row = dict[str, Any]
__all__ = ["ChangeListener", "ReplicaState", "SequenceGapError", "SyncReplica"]
#: Called for every applied change: (action, old row or None, new row or None, entry).
ChangeListener = Callable[[str, Row | None, Row | None, pb.ReplicationJournalEntry], None]


@dataclass
class ReplicaState:
    """What the replica holds and how far it got."""

    rows: dict[tuple[Any, ...], Row] = field(default_factory=dict)
    key_columns: tuple[str, ...] = ()
    columns: list[pb.ColumnDefinition] = field(default_factory=list)
    last_sequence: int = 0
    last_source_position: str = ""
    snapshot_id: str = ""
    ready: bool = False
    modes: list[int] = field(default_factory=list)  # SyncMode of every stream opened
    sequences: list[int] = field(default_factory=list)  # every journal sequence received, in order

    def key_of(self, row: Row) -> tuple[Any, ...]:
        return tuple(row.get(c) for c in self.key_columns) if self.key_columns else (tuple(sorted(row.items())),)


class SyncReplica:
    """Consume one Sync stream into a ReplicaState (asyncio)."""

    def __init__(self, channel: grpc.aio.Channel, schema: str, table: str, *, client_id: str = "",
                 max_batch_size: int = 0, on_change: ChangeListener | None = None) -> None:
        self._stub = pb_grpc.TableSyncReplicationStub(channel)
        self.schema, self.table, self.client_id = schema, table, client_id
        self.max_batch_size = max_batch_size
        self.state = ReplicaState()
        self._on_change = on_change
        self._ready = asyncio.Event()
        self._expected_sequence = 0
        self._catch_up_target = 0  # server_current_sequence at handshake: live once applied
        self._decoder = RowDecoder()

    async def wait_ready(self, timeout: float) -> None:
        await asyncio.wait_for(self._ready.wait(), timeout)

    async def run(self, *, resume: bool = False) -> None:
        """Open a Sync stream and apply it until the server ends it or the task is cancelled."""
        request = pb.SyncRequest(schema=self.schema, table=self.table, client_id=self.client_id,
                                 max_batch_size=self.max_batch_size)
        if resume:
            request.last_known_sequence = self.state.last_sequence
            request.last_known_source_position = self.state.last_source_position
        async for message in self._stub.Sync(request):
            self.apply(message)

    def apply(self, message: pb.SyncResponse) -> None:
        kind = message.WhichOneof("message")
        if kind == "handshake":
            self._on_handshake(message.handshake)
        elif kind == "snapshot_begin":
            self.state.rows.clear()
            self.state.snapshot_id = message.snapshot_begin.snapshot_id
        elif kind == "snapshot_row":
            self._upsert(self._row(message.snapshot_row.row))
        elif kind == "snapshot_rows":
            for item in message.snapshot_rows.rows:
                self._upsert(self._row(item.row))
        elif kind == "snapshot_end":
            self.state.last_sequence = message.snapshot_end.sequence
            self._expected_sequence = message.snapshot_end.sequence + 1
            if message.snapshot_end.source_position:
                self.state.last_source_position = message.snapshot_end.source_position
            self._check_caught_up()
        elif kind == "journal_entry":
            self._apply_entry(message.journal_entry)
        elif kind == "journal_batch":
            for entry in message.journal_batch.entries:
                self._apply_entry(entry)
        elif kind == "heartbeat":
            self._mark_ready()  # heartbeats are only sent to live streams

    def _on_handshake(self, handshake: pb.SyncHandshake) -> None:
        self.state.modes.append(handshake.mode)
        self.state.columns = list(handshake.columns)
        keys = sorted((c for c in handshake.columns if c.is_primary_key), key=lambda c: c.primary_key_ordinal)
        self.state.key_columns = tuple(c.column_name for c in keys)
        self._decoder = RowDecoder(Column.from_proto(c) for c in handshake.columns)
        self._expected_sequence = handshake.resume_from_sequence + 1
        self._catch_up_target = handshake.server_current_sequence
        if handshake.mode != pb.SYNC_MODE_FULL_SNAPSHOT:
            self._check_caught_up()

    def _apply_entry(self, entry: pb.ReplicationJournalEntry) -> None:
        if entry.sequence != self._expected_sequence:
            raise SequenceGapError(f"expected journal sequence {self._expected_sequence}, got {entry.sequence}")
        self._expected_sequence = entry.sequence + 1
        self.state.sequences.append(entry.sequence)
        old = self._row(entry.old_values) if entry.HasField("old_values") else None
        new = self._row(entry.new_values) if entry.HasField("new_values") else None
        if entry.action == "TRUNCATE":
            self.state.rows.clear()
        elif entry.action == "DELETE" and old is not None:
            self.state.rows.pop(self.state.key_of(old), None)
        elif new is not None:
            if old is not None:
                self.state.rows.pop(self.state.key_of(old), None)
            self._upsert(new)
        self.state.last_sequence = entry.sequence
        if entry.source_position:
            self.state.last_source_position = entry.source_position
        if self._on_change:
            self._on_change(entry.action, old, new, entry)
        self._check_caught_up()

    def _row(self, struct: Any) -> Row:
        """Struct to a row; integer columns back to int (Struct numbers are doubles)."""
        return self._decoder.decode(struct)

    def _upsert(self, row: Row) -> None:
        self.state.rows[self.state.key_of(row)] = row

    def _check_caught_up(self) -> None:
        if self._expected_sequence - 1 >= self._catch_up_target:
            self._mark_ready()

    def _mark_ready(self) -> None:
        self.state.ready = True
        self._ready.set()
