"""Rows that need no grouping: the only record of their key, written as they are (the fast path of a fold).

Grouping every record by key is what costs (a shuffle); most rows do not need it:
- BASE: no reset in the tail, so a base snapshot row whose key no tail record touches is final as it is;
- GENERATION: the tail ends with a baseline generation (its END is the last reset, and no TRUNCATE comes
  inside it), so a baseline row of that generation whose key no other tail record touches is final as it is
  (the END keeps it, nothing changes it).
Everything else (the other records, and the candidates whose key another record touches) goes through the
key-by-key fold. Which keys the other records touch is collected first; past `limit` keys it is not worth it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from laredo_kernel.changes import BatchKind

from laredo_snapshot.domain.key_fold import KeyFoldPlan
from laredo_snapshot.domain.plan import FoldPlan, PositionTuple, ResetKind
from laredo_snapshot.domain.records import BASELINE_ID, LSN, OP, ORDINAL, SEQUENCE, MessageSummary, Op, RecordValue

#: The most keys of other records collected (and sent to every task) to tell direct rows apart.
DIRECT_KEYS_LIMIT = 2_000_000
#: The fewest candidate rows for which the direct path is taken (two more Spark jobs).
DIRECT_MIN_ROWS = 100_000


class DirectKind(enum.Enum):
    NONE = "none"  # every record is grouped
    BASE = "base"  # the base snapshot's untouched rows are direct
    GENERATION = "generation"  # the last baseline generation's untouched rows are direct


@dataclass(frozen=True, slots=True)
class DirectRows:
    kind: DirectKind = DirectKind.NONE
    baseline_id: str = ""
    window_after: PositionTuple = (0, 0)
    end: PositionTuple = (0, 0)
    others: int = 0  # how many records are not candidates (an upper bound of the keys to collect)


def direct_rows(plan: FoldPlan, base_rows: int | None, summaries: Sequence[MessageSummary], *,
                limit: int = DIRECT_KEYS_LIMIT, min_rows: int = DIRECT_MIN_ROWS) -> DirectRows:
    """Which rows may skip grouping, given the plan, the base's row count (None: no base rows needed) and the
    tail's message summaries. Below min_rows candidates the extra steps cost more than they save."""
    if not plan.resets:
        if base_rows is not None and base_rows >= min_rows and plan.changes <= limit:
            return DirectRows(DirectKind.BASE, others=plan.changes)
        return DirectRows()
    last = plan.resets[-1]
    if last.kind is not ResetKind.SWEEP:
        return DirectRows()
    inside = [r for r in plan.resets[:-1] if r.position > last.window_after]
    generation_rows = sum(s.changes for s in summaries if s.kind is BatchKind.BASELINE_ROWS
                          and s.baseline_id == last.baseline_id and s.sequence <= plan.last_sequence)
    others = plan.changes - generation_rows
    if inside or others > limit or generation_rows < max(1, min_rows):
        return DirectRows()
    return DirectRows(DirectKind.GENERATION, last.baseline_id, last.window_after, last.position, others)


def generation_candidate(value: RecordValue, direct: DirectRows, plan: KeyFoldPlan) -> bool:
    """Whether a tail record is an accepted baseline row of the direct generation."""
    if value[OP] != Op.BASELINE_PUT or value[BASELINE_ID] != direct.baseline_id:
        return False
    position = (value[LSN], value[ORDINAL])
    if not direct.window_after < position < direct.end:
        return False
    sequence = value[SEQUENCE]
    if sequence > plan.last_sequence:
        return False
    bound = plan.replay_bounds.get(sequence)
    return bound is None or position > bound
