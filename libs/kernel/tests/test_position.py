"""Positions: LSN text form, (lsn, ordinal) ordering and the baseline ordinals."""

import pytest

from laredo_kernel.position import BASELINE_ORDINAL_BASE, END_OF_LSN, Position, PositionError, format_lsn, parse_lsn


@pytest.mark.parametrize(("text", "value"), [
    ("0/0", 0), ("0/16B3748", 0x16B3748), ("1/0", 1 << 32), ("ABCDEF01/23456789", 0xABCDEF0123456789),
    ("a/b", 0xA0000000B),
])
def test_lsn_round_trip(text: str, value: int) -> None:
    assert parse_lsn(text) == value
    assert parse_lsn(format_lsn(value)) == value


def test_format_lsn_pads_low_word_like_postgres() -> None:
    assert format_lsn(0x16B3748) == "0/016B3748"


@pytest.mark.parametrize("bad", ["", "0", "/1", "1/", "x/1", "1/y", "123456789/0", "0/123456789"])
def test_parse_lsn_rejects_malformed_text(bad: str) -> None:
    with pytest.raises(PositionError, match="LSN"):
        parse_lsn(bad)


def test_position_text_forms_round_trip() -> None:
    for position in (Position(10, 0), Position(10, 7), Position.baseline_row(10, 0), Position.baseline_row(10, 99),
                     Position(10)):
        assert Position.parse(str(position)) == position
    assert str(Position(0x16B3748, 3)) == "0/016B3748:3"
    assert str(Position.baseline_row(0x16B3748, 12)) == "0/016B3748:b12"
    assert Position.parse("0/16B3748").ordinal == END_OF_LSN


def test_baseline_rows_sort_before_changes_at_the_snapshot_lsn() -> None:
    rows = [Position.baseline_row(100, i) for i in range(3)]
    changes = [Position(100, 0), Position(100, 1), Position(101, 0)]
    assert sorted(changes + rows) == rows + changes
    assert all(r.is_baseline for r in rows) and not any(c.is_baseline for c in changes)
    assert Position.baseline_row(100, 0).ordinal == BASELINE_ORDINAL_BASE


def test_bare_lsn_covers_every_change_at_that_lsn() -> None:
    assert Position(100, 5) < Position(100) < Position(101, 0)


@pytest.mark.parametrize("bad", ["0/1:", "0/1:x", "0/1:b", "0/1:-3", "0/1:b-1"])
def test_position_rejects_malformed_ordinals(bad: str) -> None:
    with pytest.raises(PositionError):
        Position.parse(bad)


def test_a_later_epoch_sorts_after_everything_of_earlier_ones_and_round_trips() -> None:
    old = Position(0x5_0000_0000, 7)
    new = Position(0x100, BASELINE_ORDINAL_BASE, epoch=1)
    assert old < new and Position(0x100) < new and max(old, new) is new
    for position in (new, Position(0x100, 3, 2), Position(0x2A, epoch=12)):
        assert Position.parse(str(position)) == position
    assert str(Position(0x16B3748, 5, 2)) == "2@0/016B3748:5"
    assert Position.parse("0/16B3748:5") == Position(0x16B3748, 5, 0)


@pytest.mark.parametrize("bad", ["x@0/1:2", "@0/1", "-1@0/1"])
def test_position_rejects_a_malformed_epoch(bad: str) -> None:
    with pytest.raises(PositionError):
        Position.parse(bad)


def test_keys_order_as_positions_do_and_give_them_back() -> None:
    positions = [Position(5, BASELINE_ORDINAL_BASE), Position(5, 3), Position(5), Position(0xFFFF_FFFF_FFFF, 9),
                 Position(1, 0, 1), Position(1, 2, 1), Position(0, 0, 2)]
    assert sorted(positions, key=lambda p: p.key) == sorted(positions) == positions
    assert [Position.from_key(p.key) for p in positions] == positions
