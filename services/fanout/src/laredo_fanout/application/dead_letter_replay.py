"""ReplayDeadLetters on this instance: re-apply letters OAM sends to the replica of their table, in order.

A letter is SUPERSEDED when a later change overtook its row or its table (laredo_core.deadletters.supersede, the
rule query follows too: a replay never rolls a row back), APPLIED otherwise (the row remembers the letter's
position), FAILED with the new reason when it still cannot be applied. Each applied change is a journal entry at
the replica's next_repair_position (after the applied stream change, before any later one), so a client resuming
after that stream change gets it and one that applied it does not. The letters stay in the store: OAM removes them.
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

from laredo_fanout.application.table_replica import TableReplica, journal_effect
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
                journal_effect(replica, effect, replica.next_repair_position(), self._encoder, self._clock.now(),
                               batch.xid, batch.commit_time_unix_us)
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
