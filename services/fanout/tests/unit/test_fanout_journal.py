"""Journal: contiguous sequences, pruning by count and age under pins, resume by source position."""

from __future__ import annotations

import pytest

from laredo_kernel.position import Position
from laredo_fanout.domain.errors import EntriesPruned, JournalError
from laredo_fanout.domain.journal import Journal, JournalEntry


def entry(journal: Journal, lsn: int, at: float = 0.0, ordinal: int = 0) -> JournalEntry:
    return JournalEntry(journal.next_sequence, Position(lsn, ordinal), b"", at)


def filled(count: int, *, max_entries: int = 1000, max_age: float = 0.0) -> Journal:
    journal = Journal(max_entries, max_age)
    for i in range(1, count + 1):
        journal.append(entry(journal, lsn=i * 10, at=float(i)), now=float(i))
    return journal


def test_sequences_start_at_one_and_are_contiguous() -> None:
    journal = filled(5)
    assert [e.sequence for e in journal.entries_after(0, 100)] == [1, 2, 3, 4, 5]
    assert (journal.oldest_sequence, journal.current_sequence, len(journal)) == (1, 5, 5)


def test_empty_journal_reports_zero_oldest_and_current() -> None:
    journal = Journal(10, 0)
    assert (journal.oldest_sequence, journal.current_sequence, journal.first_retained_sequence) == (0, 0, 1)
    assert journal.entries_after(0, 10) == []


def test_append_refuses_a_gap_or_a_position_going_back() -> None:
    journal = filled(2)
    bad = JournalEntry(5, Position(100), b"", 0.0)
    with pytest.raises(JournalError, match="expects sequence 3"):
        journal.append(bad, 0.0)
    with pytest.raises(JournalError, match="goes back"):
        journal.append(entry(journal, lsn=1), 0.0)


def test_prune_by_count_keeps_the_newest() -> None:
    journal = filled(10, max_entries=3)
    assert (journal.oldest_sequence, journal.current_sequence, len(journal)) == (8, 10, 3)
    with pytest.raises(EntriesPruned):
        journal.entries_after(6, 10)
    assert [e.sequence for e in journal.entries_after(7, 10)] == [8, 9, 10]


def test_prune_by_age() -> None:
    journal = filled(10, max_age=3.5)  # at now=10 entries older than 6.5 go
    assert journal.oldest_sequence == 7
    assert journal.prune(now=100.0) == 4
    assert len(journal) == 0
    assert journal.oldest_sequence == 11 and journal.first_retained_sequence == 11
    assert journal.entries_after(10, 10) == []


def test_pins_hold_entries_above_the_lowest_pin() -> None:
    journal = Journal(2, 0)
    for i in range(1, 4):
        journal.append(entry(journal, lsn=i), now=0)
    token_low, token_high = journal.pin(2), journal.pin(3)
    for i in range(4, 10):
        journal.append(entry(journal, lsn=i), now=0)
    assert journal.oldest_sequence == 3  # 3..9 held: above the lowest pin (2)
    journal.unpin(token_low)
    journal.prune(now=0)
    assert journal.oldest_sequence == 4  # now above pin 3
    journal.unpin(token_high)
    journal.prune(now=0)
    assert (journal.oldest_sequence, len(journal)) == (8, 2)


def test_pins_also_hold_against_age() -> None:
    journal = filled(5, max_age=1.0)
    token = journal.pin(4)
    journal.prune(now=1000)
    assert journal.oldest_sequence == 5
    journal.unpin(token)
    journal.prune(now=1000)
    assert len(journal) == 0


def test_compaction_keeps_sequences_addressable() -> None:
    journal = filled(12000, max_entries=100)
    assert [e.sequence for e in journal.entries_after(11990, 5)] == [11991, 11992, 11993, 11994, 11995]


@pytest.mark.parametrize(("position", "expected"), [
    (Position(5), None),           # before the first entry, nothing pruned: not covered
    (Position(10, 0), 1),          # exactly the first entry
    (Position(10), 1),             # everything at LSN 10
    (Position(35), 3),             # between entries
    (Position(50, 0), 5),          # the last entry
    (Position(999), 5),            # ahead of the journal: nothing to send
])
def test_resume_after_position(position: Position, expected: int | None) -> None:
    assert filled(5).resume_after_position(position) == expected


def test_resume_after_position_once_pruned() -> None:
    journal = filled(10, max_entries=3)  # retains 8, 9, 10 (positions 80, 90, 100); 70 was pruned last
    assert journal.resume_after_position(Position(60)) is None
    assert journal.resume_after_position(Position(70, 0)) == 7
    assert journal.resume_after_position(Position(75)) == 7
    assert journal.resume_after_position(Position(90, 0)) == 9


def test_resume_after_position_when_everything_was_pruned() -> None:
    journal = filled(3, max_age=1.0)
    journal.prune(now=100)
    assert journal.resume_after_position(Position(30, 0)) == 3
    assert journal.resume_after_position(Position(20, 0)) is None


def test_resume_after_position_with_nothing_ever_appended() -> None:
    assert Journal(10, 0).resume_after_position(Position(5)) is None


def test_a_journal_continues_after_a_restored_snapshot() -> None:
    journal = Journal(10, 0)
    journal.continue_after(100, Position(500, 3))
    assert (journal.current_sequence, journal.first_retained_sequence, journal.oldest_sequence) == (100, 101, 101)
    assert journal.resume_after_position(Position(500, 3)) == 100  # the snapshot's own position: covered
    assert journal.resume_after_position(Position(400)) is None  # before the snapshot: not covered
    journal.append(JournalEntry(101, Position(600, 0), b"", 0.0), 0.0)
    assert journal.resume_after_position(Position(550)) == 100 and journal.entries_after(100, 5)[0].sequence == 101
    with pytest.raises(JournalError, match="new, empty journal only"):
        journal.continue_after(5, Position(1))
