"""How a Sync client catches up: the mode choice, as a pure function of what the client and journal know."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SyncMode(enum.Enum):
    FULL_SNAPSHOT = "FULL_SNAPSHOT"
    DELTA = "DELTA"
    DELTA_FROM_SNAPSHOT = "DELTA_FROM_SNAPSHOT"


@dataclass(frozen=True, slots=True)
class JournalIdentity:
    """Who numbers a journal's sequences: the fan-out instance and the epoch of its journal. A sequence means
    something only to the journal that issued it: another instance numbers its own, and the same instance starts
    again whenever its journal does (a process restart, a journal reset), which gives that journal a new epoch.
    Two sequences are comparable only under equal identities."""

    instance_id: str
    epoch: str

    def __bool__(self) -> bool:
        return bool(self.instance_id and self.epoch)

    def __str__(self) -> str:
        return f"instance {self.instance_id or '(unnamed)'} epoch {self.epoch or '(none)'}"


@dataclass(frozen=True, slots=True)
class RetainedSnapshot:
    """A stored snapshot the client says it loaded, as this instance's journal sees it. sequence: the journal
    sequence it resumes after, resolved from the snapshot's source position (None: the journal does not cover
    that position). journal_sequence: what its manifest records, the writer's journal sequence (another fan-out
    instance's, or 0 from the snapshot service): never resumed from, since journal sequences belong to one
    instance while positions are the same everywhere."""

    snapshot_id: str
    sequence: int | None
    journal_sequence: int = 0


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """The chosen mode and the sequence after which journal entries are sent (for FULL_SNAPSHOT the journal's
    current sequence, at which the snapshot is taken in the same instant). `identity`: the journal the sequences
    belong to, named in the handshake for clients that asked (None: the client did not ask)."""

    mode: SyncMode
    resume_from_sequence: int
    snapshot_id: str = ""
    reason: str = ""
    identity: JournalIdentity | None = None


def choose_sync_mode(
    *,
    last_known_sequence: int,
    position_resume_sequence: int | None,
    first_retained_sequence: int,
    current_sequence: int,
    retained_snapshot: RetainedSnapshot | None = None,
    sequence_issuer: JournalIdentity | None = None,
    journal: JournalIdentity | None = None,
) -> SyncPlan:
    """Pick the sync mode: the specification's priority order, with journal sequences honoured only where they
    were issued.

    - position_resume_sequence: the journal's answer for the client's last_known_source_position
      (None when the client sent none, it did not parse, or the journal no longer covers it);
    - first_retained_sequence: the oldest retained sequence, or current + 1 when none is retained;
    - retained_snapshot: the stored snapshot named by the client's last_snapshot_id (None: none named, or no
      such snapshot), resolved by its source position whoever wrote it;
    - sequence_issuer: the instance and epoch the client says issued last_known_sequence (None: it did not say);
      journal: this journal's identity.

    last_known_sequence counts only when sequence_issuer equals journal: through a load balancer, a sequence
    from another instance (or from this one before a restart) names other entries, and resuming after it
    would skip or repeat changes. A client that does not say where its sequence came from resumes by position
    or snapshot. The client holds every change up to its source position and every entry of this journal up to
    a sequence this journal issued, so with both the later one wins: the sequence when it is ahead (entries
    sharing a position), the position otherwise. Then a retained snapshot, then a full snapshot. A sequence is
    still in the journal when every entry after it is retained and it is not beyond the current sequence.
    """
    issued_here = bool(journal) and sequence_issuer == journal
    sequence_retained = first_retained_sequence - 1 <= last_known_sequence <= current_sequence
    by_position = position_resume_sequence
    if issued_here and last_known_sequence > 0 and sequence_retained and (
            by_position is None or last_known_sequence > by_position):
        return SyncPlan(SyncMode.DELTA, last_known_sequence, reason="sequence of this journal, still retained")
    if by_position is not None:
        return SyncPlan(SyncMode.DELTA, by_position, reason="source position covered by the journal")
    snapshot = retained_snapshot
    if snapshot is not None and snapshot.sequence is not None and snapshot.sequence >= first_retained_sequence - 1:
        return SyncPlan(SyncMode.DELTA_FROM_SNAPSHOT, snapshot.sequence, snapshot_id=snapshot.snapshot_id,
                        reason="retained snapshot, its source position covered by the journal")
    reason = _full_reason(last_known_sequence, snapshot, issued_here, sequence_issuer)
    return SyncPlan(SyncMode.FULL_SNAPSHOT, current_sequence, reason=reason)


def _full_reason(last_known_sequence: int, snapshot: RetainedSnapshot | None, issued_here: bool,
                 issuer: JournalIdentity | None) -> str:
    if snapshot is not None:
        return f"the journal no longer covers the source position of snapshot {snapshot.snapshot_id}"
    if last_known_sequence <= 0:
        return "client has no state"
    if issued_here:
        return f"sequence {last_known_sequence} is no longer in the journal"
    if not issuer:
        return f"sequence {last_known_sequence} names no instance and journal epoch, and no position is covered"
    return f"sequence {last_known_sequence} was issued by {issuer}, not by this journal"
