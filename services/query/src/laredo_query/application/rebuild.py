"""Query tables as rebuild targets (OAM RestoreSnapshot / StartReplay): a private copy, then a re-baseline.

The copy is a QueryTable of its own (no indexes, no subscribers) fed by a ChangeApplier of its own, so it
applies the stream tail as the live table does. The install is a baseline generation on the live table (every
row of the copy applied as a baseline row, then the rows it lacks deleted); indexes follow each change and
subscribers receive every difference as an event at the position of the last change the live table applied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from laredo_kernel.changes import Action, ColumnInfo, RowChange
from laredo_kernel.position import Position
from laredo_core.rebuild.gate import GatedSink
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.stream.feed import FeedMessage

from laredo_query.application.applier import ChangeApplier
from laredo_query.application.query_table import QueryTable, ReadinessSignal
from laredo_query.application.subscriptions import OverflowPolicy, SubscriberHub
from laredo_query.domain.errors import ChangeRejected, RowWithoutKey
from laredo_query.domain.events import ChangeEvent
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.domain.row_store import RowEffect, StoredRow
from laredo_query.ports import Clock

log = logging.getLogger(__name__)


class QueryRebuildTarget:
    """One query table as laredo_core.rebuild.runner.RebuildTarget; the feed's GatedSink knows its progress."""

    def __init__(self, live: QueryTable, gate: GatedSink, clock: Clock) -> None:
        self.live, self.table, self.source_id = live, live.table, live.source_id
        self._gate = gate
        self._clock = clock

    def stream_sequence(self) -> int:
        return self._gate.applied_sequence(self.live.table)

    def columns(self) -> tuple[Sequence[ColumnInfo], Sequence[str]]:
        return self.live.indexed.columns, self.live.indexed.key_columns

    def installable(self) -> bool:
        return not self.live.indexed.baseline_in_progress

    def scratch(self, manifest: SnapshotManifest, rows: list[dict[str, Any]]) -> QueryScratch:
        return QueryScratch(self.live, manifest, rows, self._clock)

    def install(self, scratch: QueryScratch, rebuild_id: str) -> QueryInstallation:  # type: ignore[override]
        return QueryInstallation(self.live, scratch.rows(), rebuild_id, self._clock)


class QueryScratch:
    """The private copy: the snapshot's rows as one baseline generation, then the tail."""

    def __init__(self, live: QueryTable, manifest: SnapshotManifest, rows: list[dict[str, Any]],
                 clock: Clock) -> None:
        self._copy = copy = QueryTable(live.source_id, live.table, IndexedTable(live.name),
                                       SubscriberHub(live.name, 1, OverflowPolicy.DROP), ReadinessSignal())
        position, generation = Position.parse(manifest.source_position), f"snapshot:{manifest.snapshot_id}"
        copy.indexed.set_columns(manifest.columns, manifest.key_columns)
        copy.indexed.begin_baseline(generation)
        try:
            for values in rows:
                copy.indexed.apply_baseline_row(generation, RowChange(position, Action.INSERT, None, values))
        except RowWithoutKey as exc:
            raise SnapshotCorrupt(f"snapshot {manifest.snapshot_id} of {live.table}: {exc}") from None
        copy.indexed.end_baseline(generation)
        copy.applied_position, copy.baseline_complete = position, True
        self.stream_sequence = manifest.stream_sequence
        self._applier = ChangeApplier({live.table: copy}, clock)

    def apply(self, message: FeedMessage) -> int:
        self._applier.on_batch(message)
        self.stream_sequence = message.stream_sequence
        return len(message.batch.changes)

    def rows(self) -> list[StoredRow]:
        return self._copy.indexed.rows()


class QueryInstallation:
    """The copy's rows into the live table as one baseline generation, `step()` by `step()`. A row the live table
    rejects (a unique index another row still holds, e.g. two rows that swapped values) is tried again after the
    others; still rejected, the live row with its key stays as it is (counted in `skipped`, logged) instead of
    being swept away."""

    def __init__(self, live: QueryTable, rows: list[StoredRow], rebuild_id: str, clock: Clock) -> None:
        self._live = live
        self._rows = rows
        self._next = 0
        self._generation = f"rebuild:{rebuild_id}"
        self._clock = clock
        self._position = live.applied_position or Position(0, 0)
        self._done = False
        self.changes = 0
        self.skipped = 0
        self._rejected: list[StoredRow] = []
        live.indexed.begin_baseline(self._generation)

    def step(self, limit: int) -> bool:
        if self._done:
            return True
        indexed, start = self._live.indexed, self._next
        self._next = end = min(start + limit, len(self._rows))
        effects: list[RowEffect] = []
        for row in self._rows[start:end]:
            try:
                effect = self._put(row.values)
            except ChangeRejected:
                self._rejected.append(row)
                continue
            if effect is not None:
                effects.append(effect)
        if end == len(self._rows):
            effects += self._retry_rejected()
            effects += indexed.end_baseline(self._generation)
            self._done = True
        self._publish(effects)
        return self._done

    def _put(self, values: Mapping[str, Any]) -> RowEffect | None:
        return self._live.indexed.apply_baseline_row(self._generation,
                                                     RowChange(self._position, Action.INSERT, None, dict(values)))

    def _retry_rejected(self) -> list[RowEffect]:
        effects = []
        for row in self._rejected:
            try:
                effect = self._put(row.values)
            except ChangeRejected as exc:
                self.skipped += 1
                log.warning("%s: a rebuilt row is not installed, the live row with its key is kept: %s",
                            self._live.table, exc)
                self._keep_live(row)
                continue
            if effect is not None:
                effects.append(effect)
        self._rejected = []
        return effects

    def _keep_live(self, row: StoredRow) -> None:
        """Mark the live row with the rejected row's key as part of the generation (its own values again)."""
        indexed = self._live.indexed
        try:
            live = indexed.get(indexed.key_spec.of_row(row.values))
        except (RowWithoutKey, KeyError, TypeError, ValueError):
            return  # the copy's row lacks the live key (skip_meta_check): nothing of the live table matches
        if live is not None:
            self._put(indexed.store.values_of(live))

    def finish(self) -> None:
        self.step(len(self._rows))

    def _publish(self, effects: list[RowEffect]) -> None:
        self.changes += len(effects)
        if effects and len(self._live.subscribers):
            now_us = int(self._clock.now() * 1_000_000)
            self._live.subscribers.publish([ChangeEvent(e.action, self._position, 0, now_us, e.old, e.new)
                                            for e in effects])

