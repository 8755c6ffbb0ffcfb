"""TableState: idempotent apply by key, unchanged TOAST merge, primary-key moves, baseline generations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from laredo_kernel.changes import Action, RowChange
from laredo_kernel.position import Position
from laredo_kernel.tuples import UNCHANGED
from laredo_fanout.domain.table_state import TableState

P = Position(1, 0)


def state() -> TableState:
    """Rows in JSON: any encoding the state can read back will do."""
    return TableState(("id",), lambda values: json.dumps(values).encode(), json.loads)


def change(action: Action, new: dict[str, Any] | None = None, old: dict[str, Any] | None = None) -> RowChange:
    return RowChange(P, action, old, new, old_is_key_only=old is not None and len(old) == 1)


def test_insert_then_same_insert_again_changes_nothing() -> None:
    s = state()
    first = s.apply(change(Action.INSERT, {"id": 1, "v": "a"}))
    assert first is not None and first.old is None and first.new is not None
    assert s.apply(change(Action.INSERT, {"id": 1, "v": "a"})) is None
    assert len(s) == 1


def test_update_keeps_unchanged_toast_value_from_the_stored_row() -> None:
    s = state()
    s.apply(change(Action.INSERT, {"id": 1, "big": "x" * 5000, "v": "a"}))
    effect = s.apply(change(Action.UPDATE, {"id": 1, "big": UNCHANGED, "v": "b"}))
    assert effect is not None
    assert effect.new is not None and s.values_of(effect.new) == {"id": 1, "big": "x" * 5000, "v": "b"}
    assert effect.old is not None and s.values_of(effect.old)["v"] == "a"
    assert s.apply(change(Action.UPDATE, {"id": 1, "big": UNCHANGED, "v": "b"})) is None  # re-apply: no effect


def test_unchanged_value_without_a_stored_row_is_left_out_rather_than_invented() -> None:
    s = state()
    effect = s.apply(change(Action.UPDATE, {"id": 7, "big": UNCHANGED, "v": "b"}))
    assert effect is not None and effect.new is not None and s.values_of(effect.new) == {"id": 7, "v": "b"}


def test_update_with_a_different_old_key_moves_the_row() -> None:
    s = state()
    s.apply(change(Action.INSERT, {"id": 1, "big": "keep", "v": "a"}))
    effect = s.apply(change(Action.UPDATE, {"id": 2, "big": UNCHANGED, "v": "a"}, old={"id": 1}))
    assert effect is not None and effect.old is not None and effect.old.key == 1
    assert s.get(1) is None
    moved = s.get(2)
    assert moved is not None and s.values_of(moved) == {"id": 2, "big": "keep", "v": "a"}
    # replaying the move is harmless: old key is gone, new row is identical
    assert s.apply(change(Action.UPDATE, {"id": 2, "big": "keep", "v": "a"}, old={"id": 1})) is None
    assert len(s) == 1


def test_delete_by_old_key_and_delete_of_a_missing_row_is_a_no_op() -> None:
    s = state()
    s.apply(change(Action.INSERT, {"id": 1, "v": "a"}))
    effect = s.apply(change(Action.DELETE, old={"id": 1}))
    assert effect is not None and effect.old is not None and s.values_of(effect.old) == {"id": 1, "v": "a"}
    assert s.apply(change(Action.DELETE, old={"id": 1})) is None
    assert len(s) == 0


def test_delete_by_a_full_old_row_finds_the_key() -> None:
    s = state()
    s.apply(change(Action.INSERT, {"id": 1, "v": "a"}))
    assert s.apply(change(Action.DELETE, old={"id": 1, "v": "a"})) is not None
    assert len(s) == 0


def test_truncate_empties_and_a_snapshot_taken_before_is_unaffected() -> None:
    s = state()
    for i in range(3):
        s.apply(change(Action.INSERT, {"id": i}))
    snapshot = s.rows()
    effect = s.apply(change(Action.TRUNCATE))
    assert effect is not None and effect.action is Action.TRUNCATE
    assert len(s) == 0 and len(snapshot) == 3


def test_rows_are_replaced_never_mutated() -> None:
    s = state()
    s.apply(change(Action.INSERT, {"id": 1, "v": "a"}))
    before = s.rows()
    s.apply(change(Action.UPDATE, {"id": 1, "v": "b"}))
    assert s.values_of(before[0]) == {"id": 1, "v": "a"}
    assert s.rows()[0] is not before[0] and s.rows()[0].encoded != before[0].encoded


def test_baseline_end_removes_rows_the_generation_did_not_contain() -> None:
    s = state()
    for i in range(4):
        s.apply(change(Action.INSERT, {"id": i, "v": "old"}))
    s.begin_baseline("b2")
    assert s.apply_baseline_row("b2", change(Action.INSERT, {"id": 1, "v": "old"})) is None  # unchanged
    assert s.apply_baseline_row("b2", change(Action.INSERT, {"id": 2, "v": "new"})) is not None
    removed = s.end_baseline("b2")
    assert sorted(e.old.key for e in removed if e.old) == [0, 3]
    assert all(e.action is Action.DELETE for e in removed)
    assert sorted(r.key for r in s.rows()) == [1, 2]


def test_rekey_switches_the_primary_key() -> None:
    s = state()
    s.apply(change(Action.INSERT, {"id": 1, "code": "a"}))
    s.rekey_columns(("code",))
    assert s.get("a") is not None and s.get(1) is None


def test_unhashable_key_values_are_made_hashable() -> None:
    s = TableState(("tags",), lambda values: json.dumps(values).encode(), json.loads)
    s.apply(change(Action.INSERT, {"tags": ["a", "b"], "v": 1}))
    assert s.get(("a", "b")) is not None


def test_a_one_column_key_is_its_value_and_a_longer_one_a_tuple() -> None:
    one = state()
    one.apply(change(Action.INSERT, {"id": 1, "v": "a"}))
    two = TableState(("id", "v"), lambda values: json.dumps(values).encode(), json.loads)
    two.apply(change(Action.INSERT, {"id": 1, "v": "a"}))
    assert [r.key for r in one.rows()] == [1] and [r.key for r in two.rows()] == [(1, "a")]
    assert two.apply(change(Action.DELETE, old={"id": 1, "v": "a"})) is not None and len(two) == 0
