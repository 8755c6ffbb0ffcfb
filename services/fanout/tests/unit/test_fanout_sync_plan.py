"""choose_sync_mode: the specification's priority order, with sequences honoured only by the journal that issued
them, as a table."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from laredo_fanout.domain.sync_plan import JournalIdentity, RetainedSnapshot, SyncMode, choose_sync_mode

FULL, DELTA, FROM_SNAPSHOT = SyncMode.FULL_SNAPSHOT, SyncMode.DELTA, SyncMode.DELTA_FROM_SNAPSHOT
JOURNAL = JournalIdentity("fanout-a", "e1")  # the journal deciding, in every case


class Case(NamedTuple):
    name: str
    last_known_sequence: int
    position_resume: int | None
    first_retained: int
    current: int
    snapshot: RetainedSnapshot | None
    mode: SyncMode
    resume_from: int
    issuer: JournalIdentity | None = JOURNAL  # who the client says issued its sequence


OTHER_INSTANCE = JournalIdentity("fanout-b", "e1")
RESTARTED = JournalIdentity("fanout-a", "e0")  # this instance, before its journal started again

CASES = [
    Case("fresh client", 0, None, 1, 50, None, FULL, 50),
    Case("fresh client, empty journal", 0, None, 1, 0, None, FULL, 0),
    Case("covered source position wins over everything", 10, 42, 5, 50, RetainedSnapshot("s", 30), DELTA, 42),
    Case("covered position with no sequence", 0, 0, 1, 0, None, DELTA, 0),
    Case("sequence inside the journal", 20, None, 5, 50, None, DELTA, 20),
    Case("sequence equal to the oldest", 5, None, 5, 50, None, DELTA, 5),
    Case("sequence just before the oldest: every later entry retained", 4, None, 5, 50, None, DELTA, 4),
    Case("sequence pruned", 3, None, 5, 50, None, FULL, 50),
    Case("sequence at the head", 50, None, 5, 50, None, DELTA, 50),
    Case("sequence beyond the head (another instance)", 51, None, 5, 50, None, FULL, 50),
    Case("sequence with everything pruned but up to date", 50, None, 51, 50, None, DELTA, 50),
    Case("sequence with everything pruned and behind", 49, None, 51, 50, None, FULL, 50),
    Case("pruned sequence falls to a retained snapshot", 3, None, 5, 50, RetainedSnapshot("s", 30), FROM_SNAPSHOT, 30),
    Case("no state but a retained snapshot", 0, None, 5, 50, RetainedSnapshot("s", 4), FROM_SNAPSHOT, 4),
    Case("snapshot older than the journal", 0, None, 5, 50, RetainedSnapshot("s", 3), FULL, 50),
    Case("sequence wins over a retained snapshot", 20, None, 5, 50, RetainedSnapshot("s", 30), DELTA, 20),
    Case("uncovered position falls to the sequence", 20, None, 5, 50, None, DELTA, 20),
    Case("restored journal: nothing retained, snapshot at the head", 0, None, 101, 100, RetainedSnapshot("s", 100),
         FROM_SNAPSHOT, 100),
    # Snapshots this instance did not write resolve by their source position; the journal_sequence in their
    # manifest (0 from the snapshot service, another instance's numbering otherwise) is never resumed from.
    Case("snapshot service's snapshot, position covered", 0, None, 5, 50, RetainedSnapshot("s", 40, 0),
         FROM_SNAPSHOT, 40),
    Case("snapshot service's snapshot restored from, nothing appended yet", 0, None, 1, 0, RetainedSnapshot("s", 0, 0),
         FROM_SNAPSHOT, 0),
    Case("snapshot service's snapshot restored from, entries appended since", 0, None, 1, 7,
         RetainedSnapshot("s", 0, 0), FROM_SNAPSHOT, 0),
    Case("snapshot service's snapshot, position no longer covered", 0, None, 5, 50, RetainedSnapshot("s", None, 0),
         FULL, 50),
    Case("another instance's snapshot: its journal sequence is beyond our head", 0, None, 5, 50,
         RetainedSnapshot("s", 30, 900), FROM_SNAPSHOT, 30),
    Case("another instance's snapshot: its journal sequence looks retained, its position is not", 0, None, 5, 50,
         RetainedSnapshot("s", None, 20), FULL, 50),
    Case("pruned sequence and an uncovered snapshot", 3, None, 5, 50, RetainedSnapshot("s", None, 45), FULL, 50),
    Case("covered client position wins over a snapshot service's snapshot", 0, 44, 5, 50,
         RetainedSnapshot("s", 40, 0), DELTA, 44),
]


# A sequence is another journal's numbering unless the client proves otherwise: through a load balancer it
# lands on an instance whose sequence N is a different change, so a DELTA after it would skip or repeat changes.
FOREIGN = [
    Case("another instance's sequence, position uncovered", 20, None, 5, 50, None, FULL, 50, OTHER_INSTANCE),
    Case("another instance's sequence, position covered", 20, 33, 5, 50, None, DELTA, 33, OTHER_INSTANCE),
    Case("another instance's sequence falls to a retained snapshot", 20, None, 5, 50, RetainedSnapshot("s", 30),
         FROM_SNAPSHOT, 30, OTHER_INSTANCE),
    Case("this instance before a restart: a new epoch", 20, None, 5, 50, None, FULL, 50, RESTARTED),
    Case("this instance before a restart, position covered", 20, 41, 5, 50, None, DELTA, 41, RESTARTED),
    Case("a sequence that names no journal", 20, None, 5, 50, None, FULL, 50, None),
    Case("a sequence that names no journal, position covered", 20, 25, 5, 50, None, DELTA, 25, None),
    Case("an instance without an epoch", 20, None, 5, 50, None, FULL, 50, JournalIdentity("fanout-a", "")),
    # The client holds both: everything up to its position, and this journal's entries up to its sequence.
    Case("this journal's sequence ahead of a covered position", 20, 18, 5, 50, None, DELTA, 20),
    Case("a covered position ahead of this journal's sequence", 20, 26, 5, 50, None, DELTA, 26),
    Case("this journal's sequence pruned, position covered", 3, 7, 5, 50, None, DELTA, 7),
]


@pytest.mark.parametrize("case", CASES + FOREIGN, ids=[c.name for c in CASES + FOREIGN])
def test_choose_sync_mode(case: Case) -> None:
    plan = choose_sync_mode(
        last_known_sequence=case.last_known_sequence, position_resume_sequence=case.position_resume,
        first_retained_sequence=case.first_retained, current_sequence=case.current,
        retained_snapshot=case.snapshot, sequence_issuer=case.issuer, journal=JOURNAL,
    )
    assert (plan.mode, plan.resume_from_sequence) == (case.mode, case.resume_from)
    assert plan.snapshot_id == ("s" if case.mode is FROM_SNAPSHOT else "")
    assert plan.reason
    if case.snapshot is not None and case.mode is FULL:
        assert "no longer covers the source position of snapshot s" in plan.reason


@pytest.mark.parametrize(("issuer", "reason"), [
    (OTHER_INSTANCE, "sequence 20 was issued by instance fanout-b epoch e1, not by this journal"),
    (RESTARTED, "sequence 20 was issued by instance fanout-a epoch e0, not by this journal"),
    (None, "sequence 20 names no instance and journal epoch, and no position is covered"),
    (JOURNAL, "sequence 3 is no longer in the journal"),
])
def test_a_refused_sequence_says_why(issuer: JournalIdentity | None, reason: str) -> None:
    sequence = 3 if issuer == JOURNAL else 20
    plan = choose_sync_mode(last_known_sequence=sequence, position_resume_sequence=None, first_retained_sequence=5,
                            current_sequence=50, sequence_issuer=issuer, journal=JOURNAL)
    assert (plan.mode, plan.reason) == (FULL, reason)


def test_a_journal_without_identity_honours_no_sequence() -> None:
    unnamed = JournalIdentity("", "")
    plan = choose_sync_mode(last_known_sequence=20, position_resume_sequence=None, first_retained_sequence=5,
                            current_sequence=50, sequence_issuer=unnamed, journal=unnamed)
    assert plan.mode is FULL
