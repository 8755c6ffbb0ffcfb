"""ReplayDeadLetters on this instance: re-apply letters OAM sends to the indexed table of their pipeline, in order.

Rules (a replay never rolls a row back):
- a change whose row changed after it (the table's KeyWatch saw a later change of that key, even a delete), or
  whose stored row holds a later position, is SUPERSEDED: nothing is applied;
- a TRUNCATE is SUPERSEDED as soon as the table applied anything after it;
- otherwise it is applied as it would have been (unique indexes checked again) and subscribers get its event:
  APPLIED; one that is rejected again is FAILED with the new reason.
The letters stay in the store: OAM removes them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from laredo_core.changes import Action, ChangeBatchInfo, RowChange, TableId
from laredo_core.coordination.ports import CommandStatus
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.replay import (
    ChangeDecoder,
    ReplayFailed,
    ReplayOutcome,
    ReplayReport,
    changes_to_replay,
    parse_replay_args,
)

from laredo_query.application.applier import TARGET_TYPE, watch_change
from laredo_query.application.query_table import QueryTable
from laredo_query.domain.errors import ChangeRejected
from laredo_query.domain.events import ChangeEvent
from laredo_query.ports import Clock

log = logging.getLogger(__name__)


class QueryDeadLetterReplay:
    def __init__(self, tables: Mapping[TableId, QueryTable], clock: Clock, decode: ChangeDecoder) -> None:
        self._tables = tables
        self._clock = clock
        self._decode = decode

    def execute(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        """A REPLAY_DEAD_LETTERS command: REJECTED when this instance has no target for the pipeline."""
        pipeline, letters = parse_replay_args(args)
        target = self._tables.get(pipeline.table)
        if pipeline.target_type != TARGET_TYPE or target is None or target.source_id != pipeline.source_id:
            return CommandStatus.REJECTED, f"this query instance has no target for pipeline {pipeline}", {}
        report = self.replay(target, pipeline, letters)
        message = (f"{pipeline}: {report.count(ReplayOutcome.APPLIED)} applied, "
                   f"{report.count(ReplayOutcome.SUPERSEDED)} superseded, {report.count(ReplayOutcome.FAILED)} failed")
        log.info("replayed dead letters: %s", message)
        return CommandStatus.SUCCEEDED, message, report.to_details()

    def replay(self, target: QueryTable, pipeline: PipelineId, letters: Sequence[DeadLetter]) -> ReplayReport:
        outcomes: dict[str, ReplayOutcome] = {}
        reasons: dict[str, str] = {}
        events: list[ChangeEvent] = []
        for letter in letters:
            try:
                applied = self._replay_one(target, letter, events)
            except (ReplayFailed, ChangeRejected) as exc:
                outcomes[letter.letter_id], reasons[letter.letter_id] = ReplayOutcome.FAILED, str(exc)
                continue
            outcomes[letter.letter_id] = ReplayOutcome.APPLIED if applied else ReplayOutcome.SUPERSEDED
        if events and len(target.subscribers):
            target.subscribers.publish(events)
        return ReplayReport(outcomes, reasons)

    def _replay_one(self, target: QueryTable, letter: DeadLetter, events: list[ChangeEvent]) -> int:
        batch, changes = changes_to_replay(letter, self._decode, target.table)
        applied = 0
        for change in changes:
            if _superseded(target, change):
                continue
            effect = target.indexed.apply(change)
            if target.watch:
                watch_change(target, change)
            if effect is not None:
                applied += 1
                events.append(ChangeEvent(effect.action, change.position, batch.xid, _commit_time(batch, self._clock),
                                          effect.old, effect.new))
        return applied


def _superseded(target: QueryTable, change: RowChange) -> bool:
    """Whether the table already holds something newer than the change (see the module's rules)."""
    position, applied = change.position, target.applied_position
    if change.action is Action.TRUNCATE:
        return applied is not None and applied > position
    store = target.indexed.store
    values = change.old if change.action is Action.DELETE else change.new
    key = store.key_of(values or {})
    later = target.watch.changed_after(key, position)
    if later is not None:
        return later
    row = store.get(key)
    if change.action is Action.DELETE:
        return row is None or (row.position is not None and row.position > position)
    return row is not None and row.position is not None and row.position >= position


def _commit_time(batch: ChangeBatchInfo, clock: Clock) -> int:
    return batch.commit_time_unix_us or int(clock.now() * 1_000_000)
