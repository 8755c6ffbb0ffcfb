"""ReplayDeadLetters on this instance: re-apply letters OAM sends to the replica of their table, in order.

Rules (a replay never rolls a row back):
- fan-out keeps no position per row, so a stored row counts as newer than any letter: an INSERT or UPDATE whose
  row exists, or a DELETE whose row is gone, is SUPERSEDED (nothing applied); otherwise it is APPLIED;
- a TRUNCATE is SUPERSEDED as soon as the table applied anything after it;
- a letter that still cannot be applied (the message does not decode, names another table, lacks the key) is
  FAILED with the new reason.
Each applied change is a journal entry with the next sequence, stored at the table's applied position (the
journal stays ordered) and sent to clients with an empty source_position: clients apply it whatever their
position and it does not move their resume position. The letters stay in the store: OAM removes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from laredo_core.changes import Action, ChangeBatchInfo, RowChange, TableId
from laredo_core.coordination.ports import CommandStatus
from laredo_core.deadletters.instance_replay import answer_replay, replay_page, truncate_superseded
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.replay import ChangeDecoder, ReplayOutcome, ReplayReport

from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.errors import ChangeNotApplicable
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.table_state import RowEffect
from laredo_fanout.ports import Clock, SyncEncoder

TARGET_TYPE = "replication-fanout"


class FanoutDeadLetterReplay:
    def __init__(self, replicas: Mapping[TableId, TableReplica], encoder: SyncEncoder, clock: Clock,
                 decode: ChangeDecoder) -> None:
        self._replicas = replicas
        self._encoder = encoder
        self._clock = clock
        self._decode = decode

    def execute(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        """A REPLAY_DEAD_LETTERS command: REJECTED when this instance has no target for the pipeline."""
        return answer_replay(args, service="fan-out", target_type=TARGET_TYPE, targets=self._replicas,
                             replay=self.replay)

    def replay(self, replica: TableReplica, pipeline: PipelineId, letters: Sequence[DeadLetter]) -> ReplayReport:
        report = replay_page(letters, self._decode, replica.table,
                             lambda batch, changes: self._apply(replica, batch, changes),
                             not_applicable=(ChangeNotApplicable,))
        if report.count(ReplayOutcome.APPLIED):
            replica.notify_appended()
        return report

    def _apply(self, replica: TableReplica, batch: ChangeBatchInfo, changes: list[RowChange]) -> int:
        applied = 0
        for change in changes:
            if _superseded(replica, change):
                continue
            effect = replica.state.apply(change)
            if effect is not None:
                self._journal(replica, effect, change, batch)
                applied += 1
        return applied

    def _journal(self, replica: TableReplica, effect: RowEffect, change: RowChange, batch: ChangeBatchInfo) -> None:
        journal, now = replica.journal, self._clock.now()
        sequence = journal.next_sequence
        position = replica.applied_position or change.position  # the journal's positions never decrease
        commit_time = batch.commit_time_unix_us or int(now * 1_000_000)
        encoded = self._encoder.journal_entry(sequence=sequence, position="", commit_time_unix_us=commit_time,
                                              xid=batch.xid, action=effect.action, old=effect.old, new=effect.new)
        journal.append(JournalEntry(sequence, position, commit_time, batch.xid, effect.action, effect.old,
                                    effect.new, now, encoded, replayed=True), now)


def _superseded(replica: TableReplica, change: RowChange) -> bool:
    """Whether the table already holds something newer than the change (see the module's rules)."""
    if change.action is Action.TRUNCATE:
        return truncate_superseded(replica, change)
    state = replica.state
    if change.action is Action.DELETE:
        key = state.key_of(change.old or {})
        return state.get(key) is None
    return state.get(state.key_of(change.new or {})) is not None
