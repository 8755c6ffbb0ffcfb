"""Folding the records of one key into its final row, given the plan: the step Spark runs per key.

Exact for every tail the plan does not send to the sequential fold: each key's records are applied in position
order, skipping replays and records after the cut, and every reset of the plan is applied at its position.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_snapshot.domain.plan import FoldPlan, PositionTuple, Reset, ResetKind
from laredo_snapshot.domain.records import (
    BASELINE_ID,
    LSN,
    OP,
    ORDINAL,
    ROW,
    SEQUENCE,
    SUB,
    UNCHANGED_NAMES,
    Op,
    RecordValue,
)

Row = str | dict[str, Any]  # a snapshot line, or a merged row not yet encoded


@dataclass(frozen=True, slots=True)
class KeyFoldPlan:
    """The part of a FoldPlan every key needs (small: shipped to every Spark task)."""

    last_sequence: int
    replay_bounds: Mapping[int, PositionTuple] = field(default_factory=dict)
    resets: tuple[Reset, ...] = ()

    @classmethod
    def of(cls, plan: FoldPlan) -> KeyFoldPlan:
        return cls(plan.last_sequence, dict(plan.replay_bounds), plan.resets)


def fold_key(values: Iterable[RecordValue], plan: KeyFoldPlan) -> Row | None:
    """The key's row after every accepted record and reset, or None when it has none."""
    records = _accepted(values, plan)
    if not records:
        return None
    resets = plan.resets
    if not resets and len(records) == 1:  # most keys: one record, nothing to order
        return _apply(None, records[0])
    records.sort(key=_order)
    state: Row | None = None
    pending = 0
    for record in records:
        position = (record[LSN], record[ORDINAL])
        while pending < len(resets) and resets[pending].position < position:
            state = _reset(state, resets[pending], records)
            pending += 1
        state = _apply(state, record)
    for reset in resets[pending:]:
        state = _reset(state, reset, records)
    return state


def _accepted(values: Iterable[RecordValue], plan: KeyFoldPlan) -> list[RecordValue]:
    last, bounds = plan.last_sequence, plan.replay_bounds
    if not bounds:
        return [v for v in values if v[SEQUENCE] <= last]
    accepted = []
    for v in values:
        sequence = v[SEQUENCE]
        if sequence > last:
            continue
        bound = bounds.get(sequence)
        if bound is None or (v[LSN], v[ORDINAL]) > bound:
            accepted.append(v)
    return accepted


def _order(record: RecordValue) -> tuple[int, int, int]:
    return record[LSN], record[ORDINAL], record[SUB]


def _apply(state: Row | None, record: RecordValue) -> Row | None:
    if record[OP] == Op.DELETE:
        return None
    unchanged = record[UNCHANGED_NAMES]
    if unchanged is None:
        return record[ROW]
    return merge_unchanged(record[ROW], unchanged, state)  # type: ignore[arg-type]


def _reset(state: Row | None, reset: Reset, records: list[RecordValue]) -> Row | None:
    if state is None or reset.kind is ResetKind.TRUNCATE:
        return None
    generation, after, end = reset.baseline_id, reset.window_after, reset.position
    for r in records:
        if r[OP] == Op.BASELINE_PUT and r[BASELINE_ID] == generation and after < (r[LSN], r[ORDINAL]) < end:
            return state
    return None


def merge_unchanged(row: str, unchanged: tuple[str, ...], stored: Row | None) -> dict[str, Any]:
    """The row with its unchanged TOASTed columns taken from the stored row (dropped when it has none), in
    column order: laredo_kernel.rows.merge_unchanged on snapshot lines."""
    values = json.loads(row)
    previous = json.loads(stored) if type(stored) is str else stored
    for name in unchanged:
        if previous is not None and name in previous:
            values[name] = previous[name]
        else:
            del values[name]
    return values
