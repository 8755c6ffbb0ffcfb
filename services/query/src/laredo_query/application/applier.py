"""Apply stream messages to each table's rows and indexes: the ChangeSink of the query service.

The rules are laredo_kernel.table_replay's, as for fan-out and the snapshot fold (a replayed change is skipped
and reported as a position regression; a replayed message's older columns are not adopted). Subscribers get
one event per effective change. Bad input never stops the stream: a change the table rejects (no key, a unique
index it would break), or a message that carries another table or does not decode, becomes a dead letter of the
target's pipeline, is counted on the table, and applying goes on; its position still counts as applied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from laredo_kernel.changes import BatchKind, ChangeBatchInfo, RowChange, TableId
from laredo_core.deadletters.recorder import DeadLetterRecorder
from laredo_kernel.position import Position
from laredo_kernel.table_replay import columns_to_adopt, replay
from laredo_core.stream.feed import UndecodableMessage
from laredo_core.stream.regressions import PositionRegressions

from laredo_query.application.query_table import QueryTable
from laredo_query.domain.errors import ChangeRejected, UniqueIndexViolation
from laredo_query.domain.events import ChangeEvent
from laredo_query.domain.row_store import RowEffect
from laredo_query.ports import Clock, FeedMessage

log = logging.getLogger(__name__)

TARGET_TYPE = "indexed-memory"


class ChangeApplier:
    """`dead_letters` records what cannot be applied (by default: logged and counted only); applying goes on."""

    def __init__(self, tables: Mapping[TableId, QueryTable], clock: Clock, *,
                 dead_letters: DeadLetterRecorder | None = None) -> None:
        self._tables = tables
        self._clock = clock
        self.dead_letters = dead_letters or DeadLetterRecorder(None, TARGET_TYPE, "query")
        self.regressions = PositionRegressions("query")

    def on_caught_up(self, table: TableId) -> None:
        target = self._tables.get(table)
        if target is not None and not target.caught_up:
            log.info("%s: caught up with the stream (%d rows)", table, len(target.indexed))
            target.mark_caught_up()

    def on_batch(self, message: FeedMessage) -> None:
        target = self._tables.get(message.table)
        batch = message.batch
        if target is None:
            log.warning("stream message %d is for %s, which has no indexed-memory target; skipped",
                        message.stream_sequence, message.table)
            return
        if batch.table != message.table:
            target.dead_letters += 1
            self.dead_letters.message_failed(target.source_id, message, (
                f"the message on the subject of {message.table} carries table {batch.table}; check the ingest "
                "subject naming (stream.subject_prefix) of every service"))
            return
        self._apply(target, message)

    def on_undecodable(self, message: UndecodableMessage) -> None:
        target = self._tables.get(message.table)
        if target is None:
            log.warning("undecodable stream message %d is for %s, which has no indexed-memory target; skipped",
                        message.stream_sequence, message.table)
            return
        target.dead_letters += 1
        self.dead_letters.undecodable(message)

    def _apply(self, target: QueryTable, message: FeedMessage) -> None:
        batch, clock = message.batch, self._clock
        events: list[ChangeEvent] = []  # nothing is built while the table has no subscribers
        subscribed = len(target.subscribers) > 0
        if columns_to_adopt(target, target.indexed.columns, batch) is not None:
            _adopt_columns(target, batch)
        kind = batch.kind
        if kind is BatchKind.RESYNC_REQUIRED:
            reason = batch.reason or "no reason given"
            log.warning("%s: the source lost continuity (%s); rows may be stale until the next baseline",
                        target.table, reason)
            target.mark_stale(f"the source lost continuity ({reason}); waiting for a new baseline")
            return
        if kind is BatchKind.SCHEMA_CHANGE:
            log.info("%s: columns changed (%s)", target.table, batch.reason or "schema change")
            return
        ending = kind is BatchKind.BASELINE_END
        removed = 0

        def effect(row_effect: RowEffect, position: Position) -> None:
            nonlocal removed
            if subscribed:
                events.append(ChangeEvent(row_effect.action, position, batch.xid,
                                          batch.commit_time_unix_us or int(clock.now() * 1_000_000),
                                          row_effect.old, row_effect.new))
            if ending:
                removed += 1
                if target.watch:  # the rows a baseline's end removed, without a change of their own
                    for row in (row_effect.old, row_effect.new, row_effect.displaced):
                        if row is not None:
                            target.watch.touched(row.key, batch.position(-1))

        def applied(change: RowChange) -> None:
            if target.watch:
                watch_change(target, change)

        def rejected(index: int, exc: Exception) -> None:  # bad input: kept as a dead letter, applying goes on
            target.skipped_changes += 1
            target.dead_letters += 1
            if isinstance(exc, UniqueIndexViolation):
                target.watch.rejected(exc.row_key)
            self.dead_letters.change_failed(target.source_id, message, index, str(exc))

        outcome = replay(target.indexed, target, batch, effect, refused=(ChangeRejected,), on_refused=rejected,
                         on_applied=applied, counts=target.applied)
        if outcome.skipped:
            target.position_regressions = self.regressions.report(
                target.table, message.stream_sequence, batch.changes[0].position, outcome.applied_before,
                outcome.skipped)
        if outcome.baseline_ended:
            log.info("%s: baseline %s complete (%d rows, %d removed as absent from it)", target.table,
                     batch.baseline_id, len(target.indexed), removed)
            target.mark_baseline_complete()
        if events:
            target.subscribers.publish(events)


def watch_change(target: QueryTable, change: RowChange) -> None:
    """Tell the table's watch which rows an applied change was about (even when it changed nothing)."""
    store = target.indexed.store
    target.watch.saw(change, lambda values: store.key_of(values) if store.spec.has_all(values)
                     else store.find_key(values), (ChangeRejected,))


def _adopt_columns(target: QueryTable, batch: ChangeBatchInfo) -> None:
    """Every message carries the table's columns; new ones re-key rows and rebuild indexes as needed."""
    indexed = target.indexed
    if not batch.columns or batch.columns == indexed.columns:
        return
    before_key, before_problems = indexed.key_spec.fields, indexed.problems
    indexed.set_columns(batch.columns, batch.key_columns)
    if before_key and indexed.key_spec.fields != before_key:
        log.info("%s: primary key is now (%s)", target.table, ", ".join(indexed.key_spec.fields))
    for problem in indexed.problems:
        if problem not in before_problems:
            log.error("%s", problem)
    target.update_readiness()
