"""One Sync call on its own channel: reads with a silence deadline and applies messages to the ClientReplica.

Per stream: the handshake comes first; a snapshot (SnapshotBegin, rows, SnapshotEnd) is staged aside and
installed whole at its end, so the rows stay usable (and an overlapping stream keeps applying) meanwhile;
journal sequences are contiguous (they may skip under subscription filters, since the server does not send
filtered-out entries); the stream is caught up once its applied sequence reaches the handshake's
server_current_sequence, or at the first heartbeat (servers send heartbeats only to live streams).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from laredo.replication.v1 import replication_pb2 as pb
from laredo.replication.v1 import replication_pb2_grpc as pb_grpc
from laredo_core.position import Position

from laredo_client.client_replica import Action, ClientReplica, PositionKey, position_key
from laredo_client.errors import ProtocolViolation, SequenceGapError, ServerChanged, StreamSilent
from laredo_client.indexed_state import Row
from laredo_client.options import ClientOptions
from laredo_client.stats import ClientStats
from laredo_client.values import Column, RowDecoder

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Initial-metadata key a server may send to name its instance; a resume by sequence is only valid there.
SERVER_ID_METADATA = "laredo-server-id"
_ACTIONS = {a.value: a for a in Action}
_OWN_CONNECTION = "grpc.use_local_subchannel_pool"


def _text(key: PositionKey) -> str:
    return str(Position(*key))


def mode_name(mode: int) -> str:
    return pb.SyncMode.Name(mode).removeprefix("SYNC_MODE_")


class SyncStream:
    """Consumes one Sync stream into a shared ClientReplica; `primary` streams also advance its cursor."""

    def __init__(self, options: ClientOptions, replica: ClientReplica, request: pb.SyncRequest, *,
                 name: str, stats: ClientStats, on_caught_up: Callable[[SyncStream], None],
                 primary: bool = False, expected_server_id: str = "") -> None:
        self.options, self.replica, self.request, self.name = options, replica, request, name
        self.stats = stats
        self.primary = primary
        self.go_away = asyncio.Event()
        self.go_away_reason = ""
        self.caught_up = asyncio.Event()
        self.handshake: pb.SyncHandshake | None = None
        self.server_id = ""
        self.applied_sequence: int | None = None  # the last sequence whose changes are in the rows
        self.task: asyncio.Task[None] | None = None
        self._on_caught_up = on_caught_up
        self._expected_server_id = expected_server_id
        self._decoder = RowDecoder(replica.columns)
        self._next_sequence = 0
        self._target = 0
        self._staging: list[Row] | None = None
        self._snapshot_begin: pb.SnapshotBegin | None = None
        self._stream_position: PositionKey | None = None  # the last source position this stream delivered
        self._dedupe = True  # off for REPLAY_ARCHIVE, whose entries may share one position

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        self.stats.streams_opened += 1
        self.task = asyncio.create_task(self._run(), name=self.name)
        return self.task

    async def close(self) -> None:
        """Cancel the call (the server sees the client leave) and wait until it is gone."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def promote(self) -> None:
        """Make this the stream whose sequence the cursor records (none yet while its snapshot is staged)."""
        self.primary = True
        cursor = self.replica.cursor
        if self.applied_sequence is None:
            cursor.sequence, cursor.server_id = 0, ""
        else:
            cursor.sequence, cursor.server_id = self.applied_sequence, self.server_id

    async def _run(self) -> None:
        """Apply the stream until the server ends it cleanly (returns) or it fails (raises)."""
        async with self._open_channel() as channel:
            call = pb_grpc.TableSyncReplicationStub(channel).Sync(self.request)
            try:
                metadata = await self._within_deadline(call.initial_metadata())
                self._check_server(metadata)
                while True:
                    message = await self._within_deadline(call.read())
                    if message is grpc.aio.EOF:
                        return
                    self.handle(message)
            finally:
                call.cancel()

    def _open_channel(self) -> grpc.aio.Channel:
        """A new channel and a new connection per stream, so a load balancer can route a re-dial elsewhere:
        by default gRPC shares one connection among all channels to the same address in a process."""
        options = self.options
        channel_options = ((_OWN_CONNECTION, 1), *options.channel_options)
        if options.channel_credentials is not None:
            return grpc.aio.secure_channel(options.address, options.channel_credentials, channel_options)
        return grpc.aio.insecure_channel(options.address, channel_options)

    async def _within_deadline(self, pending: Awaitable[T]) -> T:
        timeout = self.options.heartbeat_timeout
        try:
            async with asyncio.timeout(timeout):
                return await pending
        except TimeoutError:
            self.stats.silent_streams += 1
            raise StreamSilent(f"{self.name}: no message from {self.options.address} for {timeout:g}s "
                               f"(heartbeats included); treating the connection as dead") from None

    def _check_server(self, metadata: Any) -> None:
        server_id = metadata.get(SERVER_ID_METADATA) if metadata is not None else None
        self.server_id = server_id if isinstance(server_id, str) else ""
        if self.request.last_known_sequence and self.server_id != self._expected_server_id:
            raise ServerChanged(f"{self.name}: resumed by sequence {self.request.last_known_sequence} of server "
                                f"{self._expected_server_id!r} but reached {self.server_id or 'an unnamed server'}")

    # -- messages -------------------------------------------------------------------------------------------

    def handle(self, message: pb.SyncResponse) -> None:
        kind = message.WhichOneof("message")
        if kind == "handshake":
            self._on_handshake(message.handshake)
        elif self.handshake is None:
            raise ProtocolViolation(f"{self.name}: {kind} arrived before the handshake")
        elif kind == "journal_entry":
            self._on_entry(message.journal_entry)
        elif kind == "journal_batch":
            for entry in message.journal_batch.entries:
                self._on_entry(entry)
        elif kind == "snapshot_begin":
            self._on_snapshot_begin(message.snapshot_begin)
        elif kind == "snapshot_row":
            self._staged().append(self._decoder.decode(message.snapshot_row.row))
        elif kind == "snapshot_rows":
            staging, decode = self._staged(), self._decoder.decode
            staging.extend(decode(item.row) for item in message.snapshot_rows.rows)
        elif kind == "snapshot_end":
            self._on_snapshot_end(message.snapshot_end)
        elif kind == "heartbeat":
            if self._staging is None and self.applied_sequence is not None:
                self._mark_caught_up()  # a live stream: every entry the server had for us was sent
        elif kind == "schema_change":
            self._set_columns(message.schema_change.new_columns)
        elif kind == "go_away":
            self._on_go_away(message.go_away)

    def _on_handshake(self, handshake: pb.SyncHandshake) -> None:
        if self.handshake is not None:
            raise ProtocolViolation(f"{self.name}: a second handshake arrived")
        self.handshake = handshake
        mode = mode_name(handshake.mode)
        self.stats.record_handshake(mode)
        self._set_columns(handshake.columns)
        self._next_sequence = handshake.resume_from_sequence + 1
        self._target = handshake.server_current_sequence
        self._dedupe = handshake.mode != pb.SYNC_MODE_REPLAY_ARCHIVE
        log.info("%s: %s.%s syncs by %s from sequence %d (server at %d%s)", self.name, self.options.schema,
                 self.options.table, mode, handshake.resume_from_sequence, handshake.server_current_sequence,
                 f", server {self.server_id}" if self.server_id else "")
        if handshake.mode != pb.SYNC_MODE_FULL_SNAPSHOT:
            if handshake.snapshot_id:
                self.replica.cursor.snapshot_id = handshake.snapshot_id
            self.replica.initialized = True  # the server vouches that the client's rows are a valid base
            self._advance_sequence(handshake.resume_from_sequence)

    def _set_columns(self, definitions: Any) -> None:
        if definitions:
            columns = [Column.from_proto(d) for d in definitions]
            self.replica.set_columns(columns)
            self._decoder = RowDecoder(columns)

    def _staged(self) -> list[Row]:
        if self._staging is None:
            raise ProtocolViolation(f"{self.name}: a snapshot row arrived outside SnapshotBegin..SnapshotEnd")
        return self._staging

    def _on_snapshot_begin(self, begin: pb.SnapshotBegin) -> None:
        if self._staging is not None:
            raise ProtocolViolation(f"{self.name}: SnapshotBegin inside a snapshot")
        self._staging, self._snapshot_begin = [], begin

    def _on_snapshot_end(self, end: pb.SnapshotEnd) -> None:
        rows, begin = self._staged(), self._snapshot_begin
        assert begin is not None
        if end.rows_sent != len(rows):
            log.warning("%s: snapshot %s announced %d rows but %d arrived", self.name, begin.snapshot_id,
                        end.rows_sent, len(rows))
        position = end.source_position or begin.source_position
        self.replica.install_snapshot(rows, position=position, snapshot_id=begin.snapshot_id)
        log.info("%s: full snapshot %s installed: %d rows at sequence %d, source position %s", self.name,
                 begin.snapshot_id, len(rows), end.sequence, position or "(none)")
        self._staging, self._snapshot_begin = None, None
        self._stream_position = position_key(position)
        self._advance_sequence(end.sequence)

    def _on_entry(self, entry: pb.ReplicationJournalEntry) -> None:
        if self._staging is not None:
            raise ProtocolViolation(f"{self.name}: journal entry {entry.sequence} inside a snapshot")
        self._check_sequence(entry.sequence)
        position = entry.source_position
        key = position_key(position)
        if self._went_backwards(key) or not (self._dedupe and self.replica.already_applied(key)):
            action = _ACTIONS.get(entry.action)
            if action is None:
                raise ProtocolViolation(f"{self.name}: entry {entry.sequence} has unknown action {entry.action!r}")
            decode = self._decoder.decode
            old = decode(entry.old_values) if entry.HasField("old_values") else None
            new = decode(entry.new_values) if entry.HasField("new_values") else None
            self.replica.apply_change(action, old, new, position, key)
            self.stats.entries_applied += 1
        else:
            self.stats.entries_skipped += 1
        self._advance_sequence(entry.sequence)

    def _check_sequence(self, sequence: int) -> None:
        expected = self._next_sequence
        repeats_allowed = not self._dedupe  # REPLAY_ARCHIVE entries share their sequence
        low = expected - 1 if repeats_allowed else expected
        may_skip = bool(self.options.filters) or repeats_allowed
        if sequence < low or (sequence > expected and not may_skip):
            self.stats.sequence_gaps += 1
            raise SequenceGapError(f"{self.name}: expected journal sequence {expected}, got {sequence}; "
                                   f"reconnecting by source position")

    def _went_backwards(self, key: PositionKey | None) -> bool:
        """Positions grow along one stream; if they do not, the source was reset: apply rather than stall."""
        if not self._dedupe or key is None:
            return False
        previous, self._stream_position = self._stream_position, key
        if previous is not None and key <= previous:
            log.warning("%s: source position went backwards within one stream (%s after %s); applying the "
                        "change and continuing from the new position", self.name, _text(key), _text(previous))
            return True
        return False

    def _advance_sequence(self, sequence: int) -> None:
        self.applied_sequence = sequence
        self._next_sequence = sequence + 1
        if self.primary:
            self.replica.cursor.sequence, self.replica.cursor.server_id = sequence, self.server_id
        self._check_caught_up()

    def _check_caught_up(self) -> None:
        applied = self.applied_sequence
        if self._staging is None and applied is not None and applied >= self._target:
            self._mark_caught_up()

    def _mark_caught_up(self) -> None:
        if not self.caught_up.is_set():
            self.caught_up.set()
            self._on_caught_up(self)

    def _on_go_away(self, go_away: pb.GoAway) -> None:
        if self.go_away.is_set():
            return
        self.go_away_reason = go_away.reason or "unspecified"
        deadline = ""
        if go_away.drain_deadline_unix_ms:
            deadline = f", deadline in {go_away.drain_deadline_unix_ms / 1000 - time.time():.1f}s"
        log.info("%s: server sent GoAway (%s%s)", self.name, self.go_away_reason, deadline)
        self.go_away.set()
