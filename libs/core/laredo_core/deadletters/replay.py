"""ReplayDeadLetters between OAM and the target instances (pure): the command's arguments, each instance's
answer, and what a letter asks an instance to re-apply.

OAM sends pages of letters to every live instance of the pipeline's target; each re-applies them to its own rows
and answers a ReplayReport. Instances never change the store: OAM removes what every instance applied.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import BatchKind, ChangeBatchInfo, RowChange, TableId
from laredo_core.deadletters.model import WHOLE_MESSAGE, DeadLetter, PipelineId, letter_from_dict, letter_to_dict
from laredo_kernel.errors import LaredoError, ProtocolError

#: A page of a replay: at most this many letters, and about this many bytes of them, per command.
PAGE_LETTERS = 100
PAGE_BYTES = 256 * 1024

#: Decodes stream message bytes the way the instance's feed does (typed or JSON values); ProtocolError if not.
ChangeDecoder = Callable[[bytes], ChangeBatchInfo]


class ReplayOutcome(enum.Enum):
    APPLIED = "applied"  # the change was applied now
    SUPERSEDED = "superseded"  # the row already holds a newer change (or none is left to apply): nothing to do
    FAILED = "failed"  # it still cannot be applied; the reason says why


class ReplayFailed(LaredoError):
    """A letter still cannot be applied; the message is the new reason stored with it."""


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """One instance's answer for one page: the outcome of every letter it was given, the reason of each failure."""

    outcomes: Mapping[str, ReplayOutcome] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)

    def count(self, outcome: ReplayOutcome) -> int:
        return sum(1 for o in self.outcomes.values() if o is outcome)

    def to_details(self) -> dict[str, Any]:
        return {"applied": [i for i, o in self.outcomes.items() if o is ReplayOutcome.APPLIED],
                "superseded": [i for i, o in self.outcomes.items() if o is ReplayOutcome.SUPERSEDED],
                "failed": {i: self.reasons.get(i, "") for i, o in self.outcomes.items() if o is ReplayOutcome.FAILED}}

    @classmethod
    def from_details(cls, details: Mapping[str, Any]) -> ReplayReport:
        outcomes = {str(letter_id): outcome for outcome in (ReplayOutcome.APPLIED, ReplayOutcome.SUPERSEDED)
                    for letter_id in details.get(outcome.value) or ()}
        failed = details.get("failed") or {}
        reasons = {str(k): str(v) for k, v in failed.items()} if isinstance(failed, Mapping) else {}
        outcomes.update({letter_id: ReplayOutcome.FAILED for letter_id in reasons})
        return cls(outcomes, reasons)


def replay_args(pipeline: PipelineId, letters: Sequence[DeadLetter]) -> dict[str, Any]:
    return {"pipeline_id": str(pipeline), "letters": [letter_to_dict(letter) for letter in letters]}


def parse_replay_args(args: Mapping[str, Any]) -> tuple[PipelineId, list[DeadLetter]]:
    """The pipeline and its letters, in order; ValueError says what is malformed."""
    pipeline = PipelineId.parse(str(args.get("pipeline_id") or ""))
    letters = args.get("letters")
    if not isinstance(letters, list):
        raise ValueError("replay arguments lack the list of letters")
    try:
        parsed = [letter_from_dict(item) for item in letters]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed dead letter in the replay arguments: {exc}") from exc
    strays = [str(letter.pipeline) for letter in parsed if letter.pipeline != pipeline]
    if strays:
        raise ValueError(f"letters of other pipelines ({', '.join(sorted(set(strays)))}) in a replay of {pipeline}")
    return pipeline, parsed


def pages(letters: Iterable[DeadLetter], *, max_letters: int = PAGE_LETTERS,
          max_bytes: int = PAGE_BYTES) -> list[list[DeadLetter]]:
    """Split letters, in order, into pages of at most max_letters and about max_bytes (at least one letter each)."""
    result: list[list[DeadLetter]] = []
    page: list[DeadLetter] = []
    size = 0
    for letter in letters:
        letter_size = len(json.dumps(letter_to_dict(letter), default=str))
        if page and (len(page) >= max_letters or size + letter_size > max_bytes):
            result.append(page)
            page, size = [], 0
        page.append(letter)
        size += letter_size
    if page:
        result.append(page)
    return result


def changes_to_replay(letter: DeadLetter, decode: ChangeDecoder, table: TableId) -> tuple[ChangeBatchInfo,
                                                                                          list[RowChange]]:
    """The message of the letter and the changes it asks to re-apply (all of them for a whole message).

    Raises ReplayFailed when the message still does not decode, names another table or lacks the change.
    Control messages (baseline begin/end, schema changes) have no change to re-apply.
    """
    try:
        batch = decode(letter.message)
    except ProtocolError as exc:
        raise ReplayFailed(f"the message still does not decode: {exc}; nothing can be applied from it (purge it, "
                           "or reload the table to resynchronize)") from exc
    if batch.table != table:
        raise ReplayFailed(f"the message carries table {batch.table}, not {table}; it cannot be applied here")
    if letter.change_index == WHOLE_MESSAGE:
        data_kinds = (BatchKind.TRANSACTION, BatchKind.BASELINE_ROWS)
        return batch, list(batch.changes) if batch.kind in data_kinds else []
    if not 0 <= letter.change_index < len(batch.changes):
        raise ReplayFailed(f"the message has {len(batch.changes)} change(s), none at index {letter.change_index}")
    return batch, [batch.changes[letter.change_index]]
