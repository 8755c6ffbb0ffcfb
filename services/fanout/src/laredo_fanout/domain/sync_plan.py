"""How a Sync client catches up: the mode choice, as a pure function of what the client and journal know."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SyncMode(enum.Enum):
    FULL_SNAPSHOT = "FULL_SNAPSHOT"
    DELTA = "DELTA"
    DELTA_FROM_SNAPSHOT = "DELTA_FROM_SNAPSHOT"


@dataclass(frozen=True, slots=True)
class RetainedSnapshot:
    """A stored snapshot the client says it loaded, as this instance's journal sees it.

    sequence: the journal sequence it resumes after, resolved from the snapshot's source position (None: the
    journal does not cover that position). journal_sequence: what its manifest records, the writer's journal
    sequence (another fan-out instance's, or 0 from the snapshot service): never resumed from, since journal
    sequences belong to one instance while positions are the same everywhere.
    """

    snapshot_id: str
    sequence: int | None
    journal_sequence: int = 0


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """The chosen mode and the sequence after which journal entries are sent.

    For FULL_SNAPSHOT, resume_from_sequence is the journal's current sequence: the snapshot
    is taken at that sequence, at the same instant.
    """

    mode: SyncMode
    resume_from_sequence: int
    snapshot_id: str = ""
    reason: str = ""


def choose_sync_mode(
    *,
    last_known_sequence: int,
    position_resume_sequence: int | None,
    first_retained_sequence: int,
    current_sequence: int,
    retained_snapshot: RetainedSnapshot | None = None,
) -> SyncPlan:
    """Pick the sync mode in the specification's priority order.

    - position_resume_sequence: the journal's answer for the client's last_known_source_position
      (None when the client sent none, it did not parse, or the journal no longer covers it);
    - first_retained_sequence: the oldest retained sequence, or current + 1 when none is retained;
    - retained_snapshot: the stored snapshot named by the client's last_snapshot_id (None: none named, or no
      such snapshot), resolved by its source position whoever wrote it.

    A sequence is still in the journal when every entry after it is retained and it is not
    beyond the current sequence (a sequence from another instance can be ahead of ours).
    """
    if position_resume_sequence is not None:
        return SyncPlan(SyncMode.DELTA, position_resume_sequence, reason="source position covered by the journal")
    if last_known_sequence > 0 and first_retained_sequence - 1 <= last_known_sequence <= current_sequence:
        return SyncPlan(SyncMode.DELTA, last_known_sequence, reason="sequence still in the journal")
    snapshot = retained_snapshot
    if snapshot is not None and snapshot.sequence is not None and snapshot.sequence >= first_retained_sequence - 1:
        return SyncPlan(SyncMode.DELTA_FROM_SNAPSHOT, snapshot.sequence, snapshot_id=snapshot.snapshot_id,
                        reason="retained snapshot, its source position covered by the journal")
    return SyncPlan(SyncMode.FULL_SNAPSHOT, current_sequence, reason=_full_reason(last_known_sequence, snapshot))


def _full_reason(last_known_sequence: int, snapshot: RetainedSnapshot | None) -> str:
    if snapshot is not None:
        return f"the journal no longer covers the source position of snapshot {snapshot.snapshot_id}"
    if last_known_sequence <= 0:
        return "client has no state"
    return f"sequence {last_known_sequence} is no longer in the journal"
