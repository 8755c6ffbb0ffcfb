"""Applies one Sync stream's messages to the ClientReplica: stream grammar, sequences, snapshot staging, readiness.

Per stream: the handshake comes first; a snapshot (SnapshotBegin, rows, SnapshotEnd) is staged aside and
installed whole at its end, so the rows stay usable meanwhile, or goes to a shadow copy when it ends behind the
rows' watermark while another stream applies (ClientReplica's invariants); journal sequences are contiguous
(they may skip under subscription filters); the stream is caught up once its applied sequence reaches the
handshake's server_current_sequence, or at the first heartbeat (servers send heartbeats only to live streams).
A message's entries are decoded from its bytes in one pass: this is the client's hot path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError

from laredo.replication.v1 import replication_pb2 as pb
from laredo_kernel.position import Position

from laredo_kernel import sync_wire as wire
from laredo_client.client_replica import Action, ClientReplica, PositionKey, position_key
from laredo_client.errors import ProtocolViolation, SequenceGapError
from laredo_client.indexed_state import Row
from laredo_client.options import ClientOptions
from laredo_client.stats import ClientStats
from laredo_client.values import Column, shared_row_decoder

log = logging.getLogger(__name__)

_ACTIONS = {a.value.encode(): a for a in Action}
_FROM_BYTES = frozenset({"snapshot_row", "journal_entry", "snapshot_rows", "journal_batch"})


class StreamApplier:
    """Applies one stream's messages to a shared ClientReplica; `primary` streams also advance its cursor.
    `on_caught_up` is called once, with the stream, when it is caught up."""

    def __init__(self, options: ClientOptions, replica: ClientReplica, *, name: str, stats: ClientStats,
                 on_caught_up: Callable[[Any], None], primary: bool = False) -> None:
        self.options, self.replica, self.name, self.stats = options, replica, name, stats
        self.primary = primary
        self.go_away = asyncio.Event()
        self.go_away_reason = ""
        self.caught_up = asyncio.Event()
        self.handshake: pb.SyncHandshake | None = None
        self.server_id = ""  # the instance and journal epoch that number this stream's sequences (handshake)
        self.journal_epoch = ""
        self.applied_sequence: int | None = None  # the last sequence whose changes are in the rows (or shadow)
        self._on_caught_up = on_caught_up
        self._decoder = shared_row_decoder(replica.columns)
        self._next_sequence = 0
        self._target = 0
        self._staging: list[Row] | None = None
        self._snapshot_begin: pb.SnapshotBegin | None = None
        self._stream_position: PositionKey | None = None  # the last source position this stream delivered
        self._dedupe = True  # off for REPLAY_ARCHIVE, whose entries may share one position
        self._shadow: ClientReplica | None = None  # a snapshot behind the rows, with this stream's entries since
        replica.attach(self, self._adopt_shadow)

    def detach(self) -> None:
        """The stream is gone: it applies nothing more, and a stream left alone may install its shadow."""
        self.replica.detach(self)

    def promote(self) -> None:
        """Make this the stream whose sequence the cursor records (none yet while its snapshot is staged); a
        shadow copy replaces the rows now: this stream owns them from here on."""
        self.primary = True
        self._adopt_shadow()
        if self.applied_sequence is None:
            self.replica.cursor.forget_sequence()
        else:
            self.replica.cursor.issued(self.applied_sequence, self.server_id, self.journal_epoch)

    def handle_bytes(self, data: bytes) -> None:
        """One SyncResponse as it came off the wire. Journal entries and snapshot rows are decoded from the
        bytes (laredo_kernel.sync_wire); the other, rare messages by the generated code."""
        if self.handshake is not None:
            try:
                payload = self._located(data)
            except wire.NotCanonical:  # raised before anything was applied: let protobuf normalize the bytes
                data = self._parse(data).SerializeToString()
                payload = self._located(data)
            if payload is not None:
                entries, rows = payload
                try:
                    if entries is not None:
                        self._on_entries(data, entries)
                    else:
                        self._on_rows(data, rows or [])
                except wire.WireError as exc:
                    raise ProtocolViolation(f"{self.name}: undecodable row in a message of {len(data)} bytes "
                                            f"({exc})") from exc
                return
        self.handle(self._parse(data))

    def _located(self, data: bytes) -> tuple[list[wire.EntrySpan] | None, list[wire.RowSpan] | None] | None:
        try:
            return wire.sync_payload(data)
        except (wire.WireError, IndexError, UnicodeDecodeError) as exc:
            raise ProtocolViolation(f"{self.name}: undecodable message of {len(data)} bytes ({exc})") from exc

    def _parse(self, data: bytes) -> pb.SyncResponse:
        try:
            return pb.SyncResponse.FromString(data)
        except DecodeError as exc:
            raise ProtocolViolation(f"{self.name}: undecodable message of {len(data)} bytes ({exc})") from exc

    def handle(self, message: pb.SyncResponse) -> None:
        kind = message.WhichOneof("message")
        if kind == "handshake":
            self._on_handshake(message.handshake)
        elif self.handshake is None:
            raise ProtocolViolation(f"{self.name}: {kind} arrived before the handshake")
        elif kind in _FROM_BYTES:
            self.handle_bytes(message.SerializeToString())
        elif kind == "snapshot_begin":
            self._on_snapshot_begin(message.snapshot_begin)
        elif kind == "snapshot_end":
            self._on_snapshot_end(message.snapshot_end)
        elif kind == "heartbeat":
            if self._staging is None and self._shadow is None and self.applied_sequence is not None:
                self._mark_caught_up()  # a live stream: every entry the server had for us was sent
        elif kind == "schema_change":
            self._set_columns(message.schema_change.new_columns)
        elif kind == "go_away":
            self._on_go_away(message.go_away)

    def _on_handshake(self, handshake: pb.SyncHandshake) -> None:
        if self.handshake is not None:
            raise ProtocolViolation(f"{self.name}: a second handshake arrived")
        self.handshake = handshake
        self.server_id, self.journal_epoch = handshake.instance_id, handshake.journal_epoch
        mode = pb.SyncMode.Name(handshake.mode).removeprefix("SYNC_MODE_")
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
            if self._shadow is not None:
                self._shadow.set_columns(columns)
            self._decoder = shared_row_decoder(columns)

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
        if self._behind_another_stream(position):
            self._shadow = ClientReplica()
            self._shadow.set_columns(self.replica.columns)
            self._shadow.install_snapshot(rows, position=position, snapshot_id=begin.snapshot_id)
            log.info("%s: full snapshot %s at source position %s is behind the rows (%s) another stream applies; "
                     "it catches up in a shadow copy before it replaces them", self.name, begin.snapshot_id,
                     position, self.replica.cursor.source_position)
        else:
            self.replica.install_snapshot(rows, position=position, snapshot_id=begin.snapshot_id)
            log.info("%s: full snapshot %s installed: %d rows at sequence %d, source position %s", self.name,
                     begin.snapshot_id, len(rows), end.sequence, position or "(none)")
        self._staging, self._snapshot_begin = None, None
        self._stream_position = position_key(position)
        self._advance_sequence(end.sequence)

    def _on_rows(self, data: bytes, spans: list[wire.RowSpan]) -> None:
        staging, row = self._staged(), self._decoder.row
        staging.extend(row(data, start, end) for start, end in spans)

    def _on_entries(self, data: bytes, entries: list[wire.EntrySpan]) -> None:
        """Apply a message's journal entries in order; the sequence advances to the last one handled, even when
        a later one fails."""
        if self._staging is not None:
            raise ProtocolViolation(f"{self.name}: journal entries inside a snapshot")
        replica, decoder, dedupe = self._shadow or self.replica, self._decoder, self._dedupe
        key_names = frozenset(replica.rows.key_columns)  # all an old row is needed for
        handled: int | None = None
        applied = skipped = 0
        try:
            with replica.batch():
                for sequence, position, action_name, old_start, old_end, new_start, new_end in entries:
                    if sequence != self._next_sequence:
                        self._check_sequence(sequence)
                    key = position_key(position)
                    fresh = True  # the overlap dedupe, inline: this loop runs for every entry
                    if dedupe and key is not None:
                        previous, self._stream_position = self._stream_position, key
                        if previous is not None and key <= previous:
                            self._warn_backwards(key, previous)
                        else:
                            watermark = replica.watermark
                            fresh = watermark is None or key > watermark
                    if fresh:
                        action = _ACTIONS.get(action_name)
                        if action is None:
                            raise ProtocolViolation(f"{self.name}: entry {sequence} has unknown action "
                                                    f"{action_name.decode(errors='replace')!r}")
                        old = decoder.fields(data, old_start, old_end, key_names) if old_start >= 0 else None
                        new = decoder.row(data, new_start, new_end) if new_start >= 0 else None
                        replica.apply_change(action, old, new, position, key)
                        applied += 1
                    else:
                        skipped += 1
                    handled = sequence
                    self._next_sequence = sequence + 1
        finally:
            if handled is not None:
                stats = self.stats
                stats.entries_applied += applied
                stats.entries_skipped += skipped
                if self._shadow is not None and self._shadow_caught_up():
                    self._adopt_shadow()
                self._advance_sequence(handled)

    def _behind_another_stream(self, position: str) -> bool:
        """Whether a full snapshot at `position` would move the rows back while another stream applies."""
        key, watermark = position_key(position), self.replica.watermark
        return self.replica.shared() and key is not None and watermark is not None and key < watermark

    def _shadow_caught_up(self) -> bool:
        shadow, watermark = self._shadow, self.replica.watermark
        return shadow is not None and (watermark is None or (shadow.watermark is not None
                                                             and shadow.watermark >= watermark))

    def _adopt_shadow(self) -> None:
        """The shadow copy replaces the rows: it reached their position, or no other stream applies any more."""
        shadow, self._shadow = self._shadow, None
        if shadow is None:
            return
        self.replica.install_snapshot(shadow.rows.rows(), position=shadow.cursor.source_position,
                                      snapshot_id=shadow.cursor.snapshot_id)
        log.info("%s: full snapshot %s with this stream's entries since replaces the rows at source position %s",
                 self.name, shadow.cursor.snapshot_id, shadow.cursor.source_position or "(none)")
        if self.primary and self.applied_sequence is not None:
            self.replica.cursor.issued(self.applied_sequence, self.server_id, self.journal_epoch)
        self._check_caught_up()

    def _check_sequence(self, sequence: int) -> None:
        expected = self._next_sequence
        repeats_allowed = not self._dedupe  # REPLAY_ARCHIVE entries share their sequence
        low = expected - 1 if repeats_allowed else expected
        may_skip = bool(self.options.filters) or repeats_allowed
        if sequence < low or (sequence > expected and not may_skip):
            self.stats.sequence_gaps += 1
            raise SequenceGapError(f"{self.name}: expected journal sequence {expected}, got {sequence}; "
                                   f"reconnecting by source position")

    def _warn_backwards(self, key: PositionKey, previous: PositionKey) -> None:
        """Positions grow along one stream; if they do not, the source was reset: apply rather than stall."""
        log.warning("%s: source position went backwards within one stream (%s after %s); applying the change "
                    "and continuing from the new position", self.name, Position.from_key(key),
                    Position.from_key(previous))

    def _advance_sequence(self, sequence: int) -> None:
        self.applied_sequence = sequence
        self._next_sequence = sequence + 1
        if self.primary and self._shadow is None:
            self.replica.cursor.issued(sequence, self.server_id, self.journal_epoch)
        self._check_caught_up()

    def _check_caught_up(self) -> None:
        """Caught up: every entry the server had at the handshake is in the rows (not merely in a shadow)."""
        applied = self.applied_sequence
        if self._staging is None and self._shadow is None and applied is not None and applied >= self._target:
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
