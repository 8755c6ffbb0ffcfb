"""The fold's specification (fold_spec) holds for the sequential fold and for the key-by-key fold Spark runs,
from nothing and from every consistent base snapshot."""

from __future__ import annotations

import pytest
from services.snapshot.tests.fold_spec import (
    FoldCase,
    by_keys,
    consistent_splits,
    fold_cases,
    sequential,
    start_of,
)
from services.snapshot.tests.snapshot_testkit import by_key, canonical, decoded

from laredo_snapshot.domain.plan import FoldStart, make_plan
from laredo_snapshot.domain.records import records_of, summarize

CASES = fold_cases()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_sequential_fold_gives_the_expected_rows(case: FoldCase) -> None:
    fold, plan = sequential(decoded(case.messages))
    assert canonical(fold.rows.values()) == canonical(case.expected.values())
    assert plan.last_sequence == (case.last_sequence or len(case.messages))
    assert fold.stream_sequence == plan.last_sequence and fold.applied_position == plan.position
    assert (fold.columns, fold.key_columns) == (plan.columns, plan.key_columns)
    if case.columns:
        assert plan.columns == case.columns


@pytest.mark.parametrize("case", CASES, ids=str)
def test_key_by_key_fold_equals_the_sequential_one_from_every_base(case: FoldCase) -> None:
    messages = decoded(case.messages)
    splits = consistent_splits(case)
    assert len(splits) >= 2, "the case should offer a base snapshot somewhere"
    for split in splits:
        base, _ = sequential(messages[:split]) if split else (None, None)
        rows, plan = by_keys(messages[split:], base)
        if plan.sequential_reason:
            assert case.sequential, f"split {split}: unexpectedly sequential ({plan.sequential_reason})"
            continue
        if plan.last_sequence == 0:  # nothing complete after the base: the base is the answer
            assert base is not None and canonical(base.rows.values()) == canonical(case.expected.values())
            continue
        assert canonical(rows) == canonical(case.expected.values()), f"base after {split} messages"
        assert plan.last_sequence == (case.last_sequence or len(case.messages))
    if case.sequential:
        _, plan = by_keys(messages)
        assert plan.sequential_reason


def test_a_tail_of_replays_only_does_not_advance() -> None:
    case = next(c for c in CASES if c.name.startswith("replayed"))
    messages = decoded(case.messages)
    base, _ = sequential(messages[:-2])
    plan = make_plan(start_of(base), [summarize(s, b) for s, b in messages[-2:]])
    assert plan.last_sequence == len(messages)
    assert not plan.advances(start_of(base))  # a snapshot at the same position would be a copy
    assert set(plan.replay_bounds) == {len(messages) - 1, len(messages)}


def test_records_carry_unchanged_columns_in_place() -> None:
    case = next(c for c in CASES if c.name.startswith("unchanged"))
    (sequence, batch), = decoded(case.messages[-3:-2], first_sequence=9)
    records, summary = records_of(sequence, batch)
    (key, value), = records
    assert key == (1,) and value[5] == '{"id":1,"name":"a","note":null}' and value[6] == ("note",)
    assert summary.changes == 1 and not summary.needs_sequential


def test_rows_match_the_expected_rows_column_for_column() -> None:
    case = next(c for c in CASES if c.name.startswith("inserts"))
    fold, _ = sequential(decoded(case.messages))
    assert by_key(fold.rows.values()) == case.expected


def test_direct_rows_only_where_they_are_the_only_record_of_their_key() -> None:
    from laredo_snapshot.domain.direct import DirectKind, direct_rows

    def decide(name: str, split: int = 0, base_rows: int | None = None, **kwargs: int) -> DirectKind:
        case = next(c for c in CASES if c.name.startswith(name))
        messages = decoded(case.messages)
        base, _ = sequential(messages[:split]) if split else (None, None)
        summaries = [summarize(s, b) for s, b in messages[split:]]
        plan = make_plan(start_of(base) if base else FoldStart(), summaries)
        return direct_rows(plan, base_rows, summaries, **kwargs).kind

    assert decide("baseline only", min_rows=1) is DirectKind.GENERATION
    assert decide("baseline only", min_rows=100) is DirectKind.NONE  # too few rows to be worth it
    assert decide("inserts", min_rows=1) is DirectKind.GENERATION  # changes after the END are "others"
    assert decide("inserts", min_rows=1, limit=2) is DirectKind.NONE  # too many others
    assert decide("TRUNCATE", min_rows=1) is DirectKind.NONE  # the last reset is a TRUNCATE
    assert decide("inserts", split=5, base_rows=5, min_rows=1) is DirectKind.BASE
