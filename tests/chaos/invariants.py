"""Protocol invariants of every Sync stream a client opens, checked on the wire as the messages arrive.

Per stream: journal sequences are contiguous (each entry's sequence is the previous one + 1, from the
handshake's resume_from_sequence or the snapshot's end), no entry comes twice, source positions strictly
increase, and in a resumed stream (not a full snapshot) the first entry lies strictly after the position the
client resumed from. Per client, across its streams and restarts: the position its replica has applied never
moves backwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from laredo.replication.v1 import replication_pb2 as pb
from laredo_client.client_replica import PositionKey, position_key
from laredo_kernel.position import Position

MAX_KEPT = 50  # violations kept per client, for the report (all are counted)


def _text(key: PositionKey | None) -> str:
    return str(Position(*key)) if key is not None else "(none)"


@dataclass
class _Stream:
    resume: PositionKey | None
    asked_sequence: int
    mode: str = ""
    next_sequence: int | None = None
    position: PositionKey | None = None
    entries: int = 0
    in_snapshot: bool = False


@dataclass
class Violation:
    at: float
    client: str
    stream: str
    what: str

    def __str__(self) -> str:
        return f"t={self.at:7.1f}s {self.client} {self.stream}: {self.what}"


@dataclass
class ProtocolChecker:
    """A StreamObserver for one named client (across its restarts: `rebind` for each new LaredoClient)."""

    client: str
    clock: Callable[[], float]
    applied_position: Callable[[], str] = lambda: ""
    violations: list[Violation] = field(default_factory=list)
    count: int = 0
    streams_seen: int = 0
    by_sequence: int = 0  # streams whose request carried a journal sequence (a resume on the same instance)
    modes: dict[str, int] = field(default_factory=dict)
    _generation: int = 0
    _streams: dict[str, _Stream] = field(default_factory=dict)
    _last_applied: PositionKey | None = None

    def rebind(self, applied_position: Callable[[], str]) -> None:
        """A new client instance of the same replica (restarted from its local snapshot)."""
        self._generation += 1
        self.applied_position = applied_position

    # -- StreamObserver ------------------------------------------------------------------------------------

    def opened(self, stream: str, request: pb.SyncRequest) -> None:
        self.streams_seen += 1
        self.by_sequence += request.last_known_sequence > 0
        self._streams[self._id(stream)] = _Stream(position_key(request.last_known_source_position),
                                                  request.last_known_sequence)

    def closed(self, stream: str) -> None:
        self._streams.pop(self._id(stream), None)
        self._check_applied(stream)

    def received(self, stream: str, message: bytes) -> None:
        self._check_applied(stream)
        state = self._streams.get(self._id(stream))
        if state is None:
            return
        response = pb.SyncResponse.FromString(message)
        kind = response.WhichOneof("message")
        if kind == "handshake":
            self._on_handshake(stream, state, response.handshake)
        elif kind == "snapshot_begin":
            state.in_snapshot = True
        elif kind == "snapshot_end":
            state.in_snapshot = False
            state.next_sequence = response.snapshot_end.sequence + 1
            state.position = position_key(response.snapshot_end.source_position)
        elif kind == "journal_entry":
            self._on_entry(stream, state, response.journal_entry)
        elif kind == "journal_batch":
            for entry in response.journal_batch.entries:
                self._on_entry(stream, state, entry)

    # -- checks ---------------------------------------------------------------------------------------------

    def _on_handshake(self, stream: str, state: _Stream, handshake: pb.SyncHandshake) -> None:
        state.mode = pb.SyncMode.Name(handshake.mode).removeprefix("SYNC_MODE_")
        self.modes[state.mode] = self.modes.get(state.mode, 0) + 1
        state.next_sequence = handshake.resume_from_sequence + 1
        if handshake.mode != pb.SYNC_MODE_FULL_SNAPSHOT:
            state.position = state.resume

    def _on_entry(self, stream: str, state: _Stream, entry: pb.ReplicationJournalEntry) -> None:
        if state.in_snapshot:
            self._violate(stream, f"journal entry {entry.sequence} inside a snapshot")
        expected = state.next_sequence
        if expected is not None and entry.sequence != expected:
            kind = "a gap" if entry.sequence > expected else "a repeat"
            self._violate(stream, f"{kind}: sequence {entry.sequence} where {expected} was due "
                                  f"({state.mode}, entry #{state.entries + 1} of the stream)")
        state.next_sequence = entry.sequence + 1
        key = position_key(entry.source_position)
        if key is not None and state.position is not None and key <= state.position:
            if state.entries == 0 and state.mode != "FULL_SNAPSHOT":
                what = (f"first entry (sequence {entry.sequence}) at {_text(key)}, not after the resume position "
                        f"{_text(state.resume)} ({state.mode}, asked sequence {state.asked_sequence})")
            else:
                what = (f"position {_text(key)} of sequence {entry.sequence} not after {_text(state.position)} "
                        f"({'a duplicate' if key == state.position else 'backwards'}, {state.mode})")
            self._violate(stream, what)
        if key is not None:
            state.position = key
        state.entries += 1

    def _check_applied(self, stream: str) -> None:
        key = position_key(self.applied_position())
        if key is None:
            return
        if self._last_applied is not None and key < self._last_applied:
            self._violate(stream, f"the replica's applied position moved back from {_text(self._last_applied)} "
                                  f"to {_text(key)}")
        self._last_applied = key

    def _violate(self, stream: str, what: str) -> None:
        self.count += 1
        if len(self.violations) < MAX_KEPT:
            self.violations.append(Violation(self.clock(), self.client, self._id(stream), what))

    def _id(self, stream: str) -> str:
        return f"{stream}@{self._generation}" if self._generation else stream


def monotonic_clock(started: float | None = None) -> Callable[[], float]:
    """Seconds since `started` (now, by default)."""
    origin = time.monotonic() if started is None else started
    return lambda: time.monotonic() - origin
