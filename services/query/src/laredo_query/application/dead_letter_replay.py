"""ReplayDeadLetters on this instance: re-apply letters OAM sends to the indexed table of their pipeline, in order.

A letter is SUPERSEDED when a later change overtook its row or its table (laredo_core.deadletters.supersede, the rule
fan-out follows too: a replay never rolls a row back), APPLIED otherwise (unique indexes checked again, subscribers
get its event), FAILED with the new reason when it is rejected again. The letters stay in the store: OAM removes them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from laredo_kernel.changes import ChangeBatchInfo, RowChange, TableId
from laredo_core.coordination.ports import CommandStatus
from laredo_core.deadletters.instance_replay import answer_replay, replay_page
from laredo_core.deadletters.supersede import ABSENT, superseded
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.replay import ChangeDecoder, ReplayReport

from laredo_query.application.applier import TARGET_TYPE, watch_change
from laredo_query.application.query_table import QueryTable
from laredo_query.domain.errors import ChangeRejected
from laredo_query.domain.events import ChangeEvent
from laredo_query.domain.row_store import RowStore
from laredo_query.ports import Clock


class QueryDeadLetterReplay:
    def __init__(self, tables: Mapping[TableId, QueryTable], clock: Clock, decode: ChangeDecoder) -> None:
        self._tables = tables
        self._clock = clock
        self._decode = decode

    def execute(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        """A REPLAY_DEAD_LETTERS command: REJECTED when this instance has no target for the pipeline."""
        return answer_replay(args, service="query", target_type=TARGET_TYPE, targets=self._tables,
                             replay=self.replay)

    def replay(self, target: QueryTable, pipeline: PipelineId, letters: Sequence[DeadLetter]) -> ReplayReport:
        events: list[ChangeEvent] = []  # published together, once the page is replayed
        report = replay_page(letters, self._decode, target.table,
                             lambda batch, changes: self._apply(target, batch, changes, events),
                             not_applicable=(ChangeRejected,))
        if events and len(target.subscribers):
            target.subscribers.publish(events)
        return report

    def _apply(self, target: QueryTable, batch: ChangeBatchInfo, changes: list[RowChange],
               events: list[ChangeEvent]) -> int:
        applied, rows = 0, _Rows(target.indexed.store)
        for change in changes:
            if superseded(change, rows, target.watch, target.applied_position):
                continue
            effect = target.indexed.apply(change)
            if target.watch:
                watch_change(target, change)
            if effect is not None:
                applied += 1
                commit_time = batch.commit_time_unix_us or int(self._clock.now() * 1_000_000)
                events.append(ChangeEvent(effect.action, change.position, batch.xid, commit_time, effect.old,
                                          effect.new))
        return applied


class _Rows:
    """The table's rows as the supersede rule sees them."""

    def __init__(self, store: RowStore) -> None:
        self.key_of = store.key_of
        self._get = store.get

    def written_at(self, key: Hashable) -> Any:
        row = self._get(key)  # type: ignore[arg-type]
        return ABSENT if row is None else row.position
