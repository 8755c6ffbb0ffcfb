"""Apply stream messages to each target's rows and journal: the ChangeSink of the fan-out service.

The rules are laredo_kernel.table_replay's, shared with the snapshot service's fold (a replayed change is skipped
and reported as a position regression); each effect becomes a journal entry at the position they give it. Bad
input never stops the stream: a change that cannot be applied, or a message that carries another table or does
not decode, becomes a dead letter of the target's pipeline, is counted on the replica, and applying goes on; its
position still counts as applied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from laredo_kernel.changes import BatchKind, ChangeBatchInfo, TableId
from laredo_kernel.table_replay import columns_to_adopt, replay
from laredo_core.deadletters.recorder import DeadLetterRecorder
from laredo_kernel.position import Position
from laredo_core.stream.feed import UndecodableMessage
from laredo_core.stream.regressions import PositionRegressions

from laredo_fanout.application.table_replica import TableReplica, journal_effect
from laredo_fanout.domain.errors import ChangeNotApplicable
from laredo_fanout.domain.table_state import RowEffect
from laredo_fanout.ports import Clock, FeedMessage, Observer, SyncEncoder

log = logging.getLogger(__name__)

TARGET_TYPE = "replication-fanout"


class Replicator:
    """`dead_letters` records what cannot be applied (by default: logged and counted only); applying goes on."""

    def __init__(self, replicas: Mapping[TableId, TableReplica], encoder: SyncEncoder, clock: Clock,
                 observer: Observer, *, dead_letters: DeadLetterRecorder | None = None) -> None:
        self._replicas = replicas
        self._encoder = encoder
        self._clock = clock
        self._observer = observer
        self.dead_letters = dead_letters or DeadLetterRecorder(None, TARGET_TYPE, "fanout")
        self.regressions = PositionRegressions("fan-out")

    def on_caught_up(self, table: TableId) -> None:
        replica = self._replicas.get(table)
        if replica is not None and not replica.caught_up:
            log.info("%s: caught up with the stream (%d rows, sequence %d)", table, len(replica.state),
                     replica.journal.current_sequence)
            replica.mark_caught_up()

    def on_batch(self, message: FeedMessage) -> None:
        replica = self._replicas.get(message.table)
        batch = message.batch
        if replica is None:
            log.warning("stream message %d is for %s, which has no fan-out target; skipped",
                        message.stream_sequence, message.table)
            return
        if batch.table != message.table:
            replica.dead_letters += 1
            self.dead_letters.message_failed(replica.source_id, message, (
                f"the message on the subject of {message.table} carries table {batch.table}; check the ingest "
                "subject naming (stream.subject_prefix) of every service"))
            return
        with self._observer.applying(message) as trace:
            appended = self._adopt_columns(replica, batch)
            appended += self._apply(replica, message, trace)
        replica.stream_sequence = message.stream_sequence
        if appended:
            replica.notify_appended()

    def _adopt_columns(self, replica: TableReplica, batch: ChangeBatchInfo) -> int:
        """Every message carries the table's columns: a change is noted for clients (returns 1), a new
        primary key re-keys the stored rows. Replayed messages carry old columns and are ignored."""
        columns = columns_to_adopt(replica, replica.columns, batch)
        if columns is None:
            return 0
        old, replica.columns = replica.columns, columns
        key = batch.key_columns
        if key != replica.state.key_columns:
            if replica.state.key_columns:
                log.info("%s: primary key is now (%s)", replica.table, ", ".join(key))
            replica.state.rekey_columns(key)
        if not old:
            return 0  # the first columns seen: nothing changed for any client
        log.info("%s: columns changed (%s)", replica.table, batch.reason or f"{batch.kind.value} message")
        replica.note_schema_change(self._encoder.schema_change(
            sequence=replica.journal.current_sequence, old_columns=old, new_columns=batch.columns))
        return 1

    def on_undecodable(self, message: UndecodableMessage) -> None:
        replica = self._replicas.get(message.table)
        if replica is None:
            log.warning("undecodable stream message %d is for %s, which has no fan-out target; skipped",
                        message.stream_sequence, message.table)
            return
        replica.dead_letters += 1
        self.dead_letters.undecodable(message)

    def _apply(self, replica: TableReplica, message: FeedMessage, trace: object | None) -> int:
        batch = message.batch
        if batch.kind is BatchKind.RESYNC_REQUIRED:
            log.warning("%s: the source lost continuity (%s); rows may be stale until the next baseline",
                        replica.table, batch.reason or "no reason given")
            return 0
        journaled, encoder, now = 0, self._encoder, self._clock.now

        def journal(effect: RowEffect, position: Position) -> None:
            nonlocal journaled
            journal_effect(replica, effect, position, encoder, now(), batch.xid, batch.commit_time_unix_us, trace)
            journaled += 1

        def dead_letter(index: int, exc: Exception) -> None:  # bad input: kept as a dead letter, applying goes on
            replica.dead_letters += 1
            self.dead_letters.change_failed(replica.source_id, message, index, str(exc))

        outcome = replay(replica.state, replica, batch, journal, refused=(ChangeNotApplicable,),
                         on_refused=dead_letter, counts=replica.applied)
        if outcome.skipped:
            replica.position_regressions = self.regressions.report(
                replica.table, message.stream_sequence, batch.changes[0].position, outcome.applied_before,
                outcome.skipped)
        if outcome.baseline_ended:
            if not replica.baseline_complete:
                log.info("%s: baseline %s complete (%d rows)", replica.table, batch.baseline_id,
                         len(replica.state))
            replica.mark_baseline_complete()
        return journaled

