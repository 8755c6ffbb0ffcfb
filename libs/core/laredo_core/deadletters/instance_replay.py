"""ReplayDeadLetters on one fan-out or query instance: the command's answer and the walk through a page of letters.

Both services answer the same way (answer_replay, replay_page); applying a letter's changes is each service's own
(its ApplyChanges), what makes a change superseded one rule for both (laredo_core.deadletters.supersede).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from laredo_kernel.changes import ChangeBatchInfo, RowChange, TableId
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
from laredo_kernel.position import Position

__all__ = ["ApplyChanges", "ReplayTarget", "answer_replay", "replay_page"]

log = logging.getLogger(__name__)


class ReplayTarget(Protocol):
    """The table of one pipeline on this instance, as a replay sees it."""

    @property
    def source_id(self) -> str: ...

    @property
    def table(self) -> TableId: ...

    @property
    def applied_position(self) -> Position | None: ...


TargetT = TypeVar("TargetT", bound=ReplayTarget)
#: Applies the changes of one letter (from `batch`) that are not superseded; how many it applied. Raises one
#: of the service's `not_applicable` errors when the target still refuses a change.
ApplyChanges = Callable[[ChangeBatchInfo, list[RowChange]], int]
#: Replays one page of letters on one target (typically built on replay_page).
ReplayOnTarget = Callable[[TargetT, PipelineId, list[DeadLetter]], ReplayReport]


def answer_replay(args: Mapping[str, Any], *, service: str, target_type: str, targets: Mapping[TableId, TargetT],
                  replay: ReplayOnTarget[TargetT]) -> tuple[CommandStatus, str, dict[str, Any]]:
    """The answer to a REPLAY_DEAD_LETTERS command with `args`; ValueError when they are malformed.

    REJECTED when this instance (of `service`) has no `target_type` target of the pipeline's table and source.
    """
    pipeline, letters = parse_replay_args(args)
    target = targets.get(pipeline.table)
    if pipeline.target_type != target_type or target is None or target.source_id != pipeline.source_id:
        return CommandStatus.REJECTED, f"this {service} instance has no target for pipeline {pipeline}", {}
    report = replay(target, pipeline, letters)
    message = (f"{pipeline}: {report.count(ReplayOutcome.APPLIED)} applied, "
               f"{report.count(ReplayOutcome.SUPERSEDED)} superseded, {report.count(ReplayOutcome.FAILED)} failed")
    log.info("replayed dead letters: %s", message)
    return CommandStatus.SUCCEEDED, message, report.to_details()


def replay_page(letters: Sequence[DeadLetter], decode: ChangeDecoder, table: TableId, apply: ApplyChanges, *,
                not_applicable: tuple[type[Exception], ...] = ()) -> ReplayReport:
    """Each letter's outcome, in order: APPLIED when `apply` applied any of its changes, else SUPERSEDED;
    FAILED (with the reason) when its message no longer yields a change of `table` or `apply` raised one of
    `not_applicable`."""
    outcomes: dict[str, ReplayOutcome] = {}
    reasons: dict[str, str] = {}
    for letter in letters:
        try:
            batch, changes = changes_to_replay(letter, decode, table)
            applied = apply(batch, changes)
        except (ReplayFailed, *not_applicable) as exc:
            outcomes[letter.letter_id], reasons[letter.letter_id] = ReplayOutcome.FAILED, str(exc)
            continue
        outcomes[letter.letter_id] = ReplayOutcome.APPLIED if applied else ReplayOutcome.SUPERSEDED
    return ReplayReport(outcomes, reasons)

