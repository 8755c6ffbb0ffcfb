"""Repair positions: after the stream change they follow and its earlier repairs, before any later change."""

import pytest

from laredo_kernel.position import BASELINE_ORDINAL_BASE, END_OF_LSN, Position, PositionError


@pytest.mark.parametrize(("text", "position"), [
    ("0/016B3748:5+1", Position(0x16B3748, 5, repair=1)),
    ("0/016B3748:b12+3", Position.baseline_row(0x16B3748, 12).next_repair().next_repair().next_repair()),
    ("0/016B3748+2", Position(0x16B3748, END_OF_LSN, repair=2)),
    ("0/016B3748:5", Position(0x16B3748, 5)),
    ("0/016B3748", Position(0x16B3748)),
    ("0/016B3748:b0", Position(0x16B3748, BASELINE_ORDINAL_BASE)),
])
def test_repair_text_forms_round_trip(text: str, position: Position) -> None:
    assert Position.parse(text) == position
    assert str(position) == text
    assert Position.parse(str(position)) == position


def test_parse_accepts_any_case_and_unpadded_lsns_with_a_repair() -> None:
    assert Position.parse(" 0/16b3748:5+12 ") == Position(0x16B3748, 5, repair=12)


@pytest.mark.parametrize("bad", ["0/1:2+", "0/1:2+0", "0/1:2+x", "0/1:2+-1", "0/1+1+1", "0/1:2+\u00b2", "+1"])
def test_malformed_repair_counts_are_refused_with_the_form_expected(bad: str) -> None:
    with pytest.raises(PositionError):
        Position.parse(bad)


def test_repairs_sort_after_their_change_and_before_every_later_change() -> None:
    change = Position(100, 4)
    repairs = [change.next_repair(), change.next_repair().next_repair()]
    later = [Position(100, 5), Position(101, 0), Position.baseline_row(101, 0), Position(101)]
    assert sorted([*reversed(later), *reversed(repairs), change]) == [change, *repairs, *sorted(later)]
    assert Position(100, 3).next_repair() < change  # a repair follows its own change only
    assert Position(100).next_repair() > Position(100, 99)  # after a bare LSN: after all of it


def test_the_stream_part_drops_the_repair_count() -> None:
    change = Position(100, 4)
    assert change.stream is change
    assert change.next_repair().next_repair().stream == change
    assert change.next_repair().repair == 1 and change.next_repair().next_repair().repair == 2


def test_keys_order_as_positions_and_turn_back_into_them() -> None:
    positions = [Position(100, 4), Position(100, 4, repair=2), Position(100, 5), Position.baseline_row(100, 1),
                 Position(7, 1, 1, 3)]
    assert sorted(positions, key=lambda p: p.key) == sorted(positions)
    for position in positions:
        assert Position.from_key(position.key) == position
