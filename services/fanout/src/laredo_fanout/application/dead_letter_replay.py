"""ReplayDeadLetters on this instance: re-apply letters OAM sends to the replica of their table, in order.

Rules (a replay never rolls a row back; query decides by the same rule, laredo_core.deadletters.supersede):
- a change whose row changed after it (the replica's KeyWatch saw a later change of that key, even a delete), or
  whose stored row was written by a later change (a DELETE: also one whose row is gone), is SUPERSEDED: nothing
  is applied; otherwise it is APPLIED, and the row remembers the letter's position;
- a TRUNCATE is SUPERSEDED as soon as the table applied a stream change after it;
- a letter that still cannot be applied (the message does not decode, names another table, lacks the key) is
  FAILED with the new reason.
Each applied change is a journal entry with the next sequence at a repair position of its own (the replica's
next_repair_position: after the applied stream change, before any later one), sent to clients as its source
position: a client resuming after the applied stream change gets it, one that applied it resumes after it.
The letters stay in the store: OAM removes them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from laredo_kernel.changes import ChangeBatchInfo, RowChange, TableId
from laredo_core.coordination.ports import CommandStatus
from laredo_core.deadletters.instance_replay import answer_replay, replay_page
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.replay import ChangeDecoder, ReplayOutcome, ReplayReport
from laredo_core.deadletters.supersede import ABSENT, superseded

from laredo_fanout.application.repairs import journal_repair
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.errors import ChangeNotApplicable
from laredo_fanout.domain.table_state import TableState
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
        applied, rows, state = 0, _Rows(replica.state), replica.state
        for change in changes:
            if superseded(change, rows, replica.watch, replica.applied_position):
                continue
            effect = state.apply(change)
            if replica.watch:
                replica.watch.saw(change, state.find_key, (ChangeNotApplicable,))
            if effect is not None:
                journal_repair(replica, effect, self._encoder, self._clock, xid=batch.xid,
                               commit_time_unix_us=batch.commit_time_unix_us)
                applied += 1
        return applied


class _Rows:
    """The replica's rows as the supersede rule sees them."""

    def __init__(self, state: TableState) -> None:
        self.key_of = state.key_of
        self._state = state

    def written_at(self, key: Hashable) -> Any:
        row = self._state.get(key)  # type: ignore[arg-type]
        return ABSENT if row is None else self._state.written_at(row)
