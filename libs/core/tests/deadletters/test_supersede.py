"""The one rule that says whether a replayed change is superseded, and the KeyWatch it reads."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pytest

from laredo_kernel.changes import Action, RowChange
from laredo_core.deadletters.key_watch import KeyWatch
from laredo_core.deadletters.supersede import ABSENT, superseded, truncate_superseded
from laredo_kernel.position import Position


class NoKey(Exception):
    pass


class Rows:
    """Rows by "id", each with the position that wrote it (None: unknown)."""

    def __init__(self, rows: Mapping[int, Position | None]) -> None:
        self.rows = dict(rows)

    def key_of(self, values: Mapping[str, Any]) -> Hashable:
        if "id" not in values:
            raise NoKey("no id")
        return values["id"]

    def written_at(self, key: Hashable) -> Position | None:
        return self.rows.get(key, ABSENT)  # type: ignore[arg-type]


AT = Position(0x20, 5)
BEFORE, LATER = Position(0x20, 4), Position(0x21, 0)


def change(action: Action) -> RowChange:
    row = {"id": 1, "v": "x"}
    return RowChange(AT, action, row if action is Action.DELETE else None, None if action is Action.DELETE else row)


@pytest.mark.parametrize(("action", "written", "expected"), [
    (Action.INSERT, ABSENT, False),  # the row is not there: apply
    (Action.INSERT, None, False),  # a row of unknown age is older than any change
    (Action.INSERT, BEFORE, False),
    (Action.INSERT, AT, True),  # already applied
    (Action.INSERT, LATER, True),
    (Action.UPDATE, BEFORE, False),
    (Action.UPDATE, LATER, True),
    (Action.DELETE, ABSENT, True),  # already gone
    (Action.DELETE, None, False),
    (Action.DELETE, AT, False),
    (Action.DELETE, LATER, True),
])
def test_the_row_position_decides_when_the_key_is_not_watched(action: Action, written: Any, expected: bool) -> None:
    rows = Rows({} if written is ABSENT else {1: written})
    assert superseded(change(action), rows, KeyWatch(), Position(0x30, 0)) is expected


def test_a_watched_key_decides_even_when_the_row_is_gone() -> None:
    watch = KeyWatch()
    watch.rejected(1)
    assert not superseded(change(Action.INSERT), Rows({}), watch, None)  # nothing applied to it since
    watch.touched(1, LATER)  # e.g. a delete of the row after the rejected insert
    assert superseded(change(Action.INSERT), Rows({}), watch, None)


def test_a_change_without_its_key_is_refused_with_the_services_error() -> None:
    with pytest.raises(NoKey):
        superseded(RowChange(AT, Action.INSERT, None, {"v": 1}), Rows({}), KeyWatch(), None)


def test_a_truncate_is_superseded_once_the_table_applied_a_stream_change_after_it() -> None:
    truncate = RowChange(Position(0x20, 1), Action.TRUNCATE, None, None)
    assert not truncate_superseded(None, truncate)
    assert not truncate_superseded(Position(0x20, 1), truncate)
    assert not truncate_superseded(Position(0x20, 1).next_repair(), truncate)  # a repair is no stream change
    assert truncate_superseded(Position(0x20, 2), truncate)
    assert superseded(truncate, Rows({}), KeyWatch(), Position(0x20, 2))


def test_the_watch_sees_the_rows_an_applied_change_names() -> None:
    watch = KeyWatch()
    watch.rejected(1)
    watch.rejected(2)
    find = Rows({}).key_of
    watch.saw(RowChange(LATER, Action.UPDATE, {"id": 2}, {"id": 1}), find)  # a key change: both rows
    assert watch.changed_after(1, AT) and watch.changed_after(2, AT)
    watch.saw(RowChange(Position(0x22, 0), Action.UPDATE, None, {"v": 1}), find, (NoKey,))  # names no row
    watch.saw(RowChange(Position(0x23, 0), Action.TRUNCATE, None, None), find)
    assert not watch.changed_after(1, Position(0x23, 0)) and watch.changed_after(1, Position(0x22, 9))
    assert watch.changed_after(3, AT) is None
