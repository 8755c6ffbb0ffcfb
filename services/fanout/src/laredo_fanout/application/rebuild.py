"""Fan-out tables as rebuild targets (OAM RestoreSnapshot / StartReplay): a private copy, then a re-baseline.

The copy is a TableReplica fed by a Replicator of its own, so it applies the stream tail as the live table does,
without encoding messages for clients. The install is a baseline generation on the live state (every row of the copy
applied as a baseline row, then the rows it lacks deleted); each difference is a journal entry at the replica's
next_repair_position, so connected clients and clients resuming by position after the applied stream change receive
it. Installed rows are written at the applied stream position (what a dead-letter replay compares with, as in query).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from laredo_kernel.changes import Action, ColumnInfo, RowChange
from laredo_kernel.position import ZERO
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.stream.feed import FeedMessage

from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica, journal_effect
from laredo_fanout.domain.table_state import RowEffect, StoredRow
from laredo_fanout.ports import Clock, Observer, SyncEncoder

log = logging.getLogger(__name__)

_COPY_LIMITS = ReplicaLimits(journal_max_entries=1, journal_max_age=0.0, heartbeat_interval=5.0, max_clients=0)


class FanoutRebuildTarget:
    """One fan-out table as laredo_core.rebuild.runner.RebuildTarget; `untraced` observes the private copies."""

    def __init__(self, replica: TableReplica, encoder: SyncEncoder, clock: Clock, untraced: Observer) -> None:
        self.replica, self.table, self.source_id = replica, replica.table, replica.source_id
        self._encoder = encoder
        self._clock = clock
        self._untraced = untraced

    def stream_sequence(self) -> int:
        return self.replica.stream_sequence

    def columns(self) -> tuple[Sequence[ColumnInfo], Sequence[str]]:
        return self.replica.columns, self.replica.state.key_columns

    def installable(self) -> bool:
        return not self.replica.state.baseline_in_progress

    def scratch(self, manifest: SnapshotManifest, rows: list[dict[str, Any]]) -> FanoutScratch:
        return FanoutScratch(self.replica, manifest, rows, self._encoder, self._clock, self._untraced)

    def install(self, scratch: FanoutScratch, rebuild_id: str) -> FanoutInstallation:  # type: ignore[override]
        return FanoutInstallation(self.replica, scratch, rebuild_id, self._encoder, self._clock)


class FanoutScratch:
    """The private copy: the snapshot's rows, then the tail applied by a Replicator of its own."""

    def __init__(self, live: TableReplica, manifest: SnapshotManifest, rows: list[dict[str, Any]],
                 encoder: SyncEncoder, clock: Clock, observer: Observer) -> None:
        rows_only = _RowsOnly(encoder)
        self._copy = TableReplica(live.source_id, live.table, _COPY_LIMITS, rows_only)
        self._copy.restore(manifest, rows)
        self._replicator = Replicator({live.table: self._copy}, rows_only, clock, observer)
        self.values = self._copy.state.decode  # a row's values, read back from its wire form

    @property
    def stream_sequence(self) -> int:
        return self._copy.stream_sequence

    def apply(self, message: FeedMessage) -> int:
        self._replicator.on_batch(message)
        return len(message.batch.changes)

    def rows(self) -> list[StoredRow]:
        return self._copy.state.rows()


class FanoutInstallation:
    """The copy's rows into the live state as one baseline generation, `step()` by `step()`."""

    def __init__(self, replica: TableReplica, scratch: FanoutScratch, rebuild_id: str, encoder: SyncEncoder,
                 clock: Clock) -> None:
        self._replica = replica
        self._rows, self._values = scratch.rows(), scratch.values
        self._next = 0
        self._generation = f"rebuild:{rebuild_id}"
        self._encoder = encoder
        self._clock = clock
        self._position = (replica.applied_position or ZERO).stream  # of the installed rows
        self._done = False
        self.changes = 0
        self.skipped = 0
        replica.state.begin_baseline(self._generation)

    def step(self, limit: int) -> bool:
        if self._done:
            return True
        state, start, appended = self._replica.state, self._next, 0
        self._next = end = min(start + limit, len(self._rows))
        for row in self._rows[start:end]:
            try:
                effect = state.apply_baseline_row(self._generation, RowChange(self._position, Action.INSERT, None,
                                                                              self._values(row)))
            except KeyError as exc:  # the copy's row lacks a key column of the live table (skip_meta_check)
                self.skipped += 1
                log.warning("%s: a rebuilt row is not installed: %s", self._replica.table, exc)
                continue
            if effect is not None:
                self._journal(effect)
                appended += 1
        if end == len(self._rows):
            for effect in state.end_baseline(self._generation):
                self._journal(effect)
                appended += 1
            self._done = True
        if appended:
            self.changes += appended
            self._replica.notify_appended()
        return self._done

    def finish(self) -> None:
        self.step(len(self._rows))

    def _journal(self, effect: RowEffect) -> None:
        journal_effect(self._replica, effect, self._replica.next_repair_position(), self._encoder, self._clock.now())


class _RowsOnly:
    """The SyncEncoder of a private copy: its rows as the live table's, its messages not at all (nobody receives
    them)."""

    def __init__(self, encoder: SyncEncoder) -> None:
        self.encode_row, self.decode_row, self.entry_rows = encoder.encode_row, encoder.decode_row, encoder.entry_rows

    def journal_entry(self, **fields: Any) -> bytes:
        return b""

    def schema_change(self, **fields: Any) -> bytes:
        return b""
