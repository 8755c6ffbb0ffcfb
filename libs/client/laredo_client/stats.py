"""Counters of what a client went through: streams, handshake modes, re-syncs, handoffs, skipped replays."""

from __future__ import annotations

from dataclasses import dataclass, field

FULL_SNAPSHOT = "FULL_SNAPSHOT"
MODES_KEPT = 1000


@dataclass
class ClientStats:
    restored_from_local: bool = False
    server_snapshot_id: str = ""  # the stored snapshot the client bootstrapped from (bootstrap_from_server_snapshot)
    streams_opened: int = 0
    modes: list[str] = field(default_factory=list)  # the handshake mode of each stream (the last 1,000)
    full_snapshots: int = 0
    full_resyncs: int = 0  # FULL_SNAPSHOT handshakes after the initial one (any, after a local restore)
    handoffs: int = 0  # GoAway handoffs completed (the new stream caught up, or the old one ended first)
    reconnects: int = 0  # streams opened after a stream failed or ended
    sequence_gaps: int = 0
    silent_streams: int = 0
    entries_applied: int = 0
    entries_skipped: int = 0  # replays at or below the applied source position (overlap, resume)

    def record_handshake(self, mode: str) -> None:
        self.modes.append(mode)
        if len(self.modes) > MODES_KEPT:
            del self.modes[:-MODES_KEPT]
        if mode == FULL_SNAPSHOT:
            if self.full_snapshots or self.restored_from_local or self.server_snapshot_id:
                self.full_resyncs += 1
            self.full_snapshots += 1
