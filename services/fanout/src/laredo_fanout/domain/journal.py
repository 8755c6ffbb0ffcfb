"""The change journal of one fan-out target: contiguous sequences, bounded by count and age, pinnable.

Invariants:
- sequences start at 1 and every append takes exactly the next one: no gap, ever;
- retained entries are a contiguous range [oldest, current]; pruning only removes from the old end;
- pruning never removes an entry whose sequence is above the lowest pin;
- entry positions never decrease, so "everything after position P" is a suffix of the journal;
- `epoch` names this numbering: a new journal (a process start, a reset) gets a new one, so a sequence
  issued under another epoch is never taken for one of ours.
"""

from __future__ import annotations

import bisect
import secrets
from collections import Counter
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action
from laredo_kernel.position import END_OF_LSN, Position

from laredo_fanout.domain.errors import EntriesPruned, JournalError

_COMPACT_AFTER = 4096


class JournalEntry:
    """One effective change, never modified. `encoded` is its wire form as one message, built once for every
    client; what else it says (its action, the rows before and after) is read back from it when needed (EntryRows,
    ports.SyncEncoder.entry_rows): an entry keeps no more than its message, its position and its sequence.
    `trace` is an opaque reference to the trace of the batch that produced it (see ports.Observer).
    """

    __slots__ = ("sequence", "position", "encoded", "appended_at", "trace")

    def __init__(self, sequence: int, position: Position, encoded: bytes, appended_at: float,
                 trace: object | None = None) -> None:
        self.sequence, self.position, self.encoded = sequence, position, encoded
        self.appended_at, self.trace = appended_at, trace

    def __repr__(self) -> str:
        return f"JournalEntry({self.sequence}, at {self.position}, {len(self.encoded)} bytes)"


@dataclass(frozen=True, slots=True)
class EntryRows:
    """A journal entry's action and the values of its rows before and after (None when absent), read back from
    its message for subscription filters; shared by every reader: never modify them."""

    action: Action
    old: dict[str, Any] | None
    new: dict[str, Any] | None


class Journal:
    """Retains recent entries for catch-up; `max_age` 0 disables age pruning."""

    def __init__(self, max_entries: int, max_age: float, epoch: str = "") -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.epoch = epoch or secrets.token_hex(8)  # unique per journal: sequences restart with a new one
        self._max_entries = max_entries
        self._max_age = max_age
        self._entries: list[JournalEntry] = []
        self._head = 0  # index of the oldest retained entry; entries before it are pruned
        self._next_sequence = 1
        self._pins: Counter[int] = Counter()
        self._pruned_through: Position | None = None  # position of the newest pruned entry

    @property
    def next_sequence(self) -> int:
        return self._next_sequence

    @property
    def current_sequence(self) -> int:
        """The newest sequence ever appended (0 before the first append)."""
        return self._next_sequence - 1

    @property
    def first_retained_sequence(self) -> int:
        """The oldest retained sequence, or current + 1 when nothing is retained."""
        return self._entries[self._head].sequence if self._head < len(self._entries) else self._next_sequence

    @property
    def oldest_sequence(self) -> int:
        """The oldest retained sequence as clients see it: 0 while the journal never held anything."""
        return self.first_retained_sequence if self.current_sequence else 0

    def __len__(self) -> int:
        return len(self._entries) - self._head

    def continue_after(self, sequence: int, position: Position) -> None:
        """Start an empty journal after a restored state: the next entry gets `sequence` + 1, and a client
        at or after `position` is covered (it resumes at `sequence`)."""
        if self._entries or self._next_sequence != 1:
            raise JournalError("continue_after() applies to a new, empty journal only")
        self._next_sequence = sequence + 1
        self._pruned_through = position

    def append(self, entry: JournalEntry, now: float) -> None:
        """Append the entry carrying `next_sequence`, then prune by count and age."""
        if entry.sequence != self._next_sequence:
            raise JournalError(f"journal expects sequence {self._next_sequence}, got {entry.sequence}")
        if self and entry.position < self._entries[-1].position:
            raise JournalError(f"entry {entry.sequence} at {entry.position} goes back before "
                               f"{self._entries[-1].position}")
        self._entries.append(entry)
        self._next_sequence += 1
        self.prune(now)

    def prune(self, now: float) -> int:
        """Drop entries beyond max_entries or older than max_age, never above the lowest pin."""
        floor = min(self._pins) if self._pins else None
        pruned = 0
        while self._head < len(self._entries):
            first = self._entries[self._head]
            too_many = len(self) > self._max_entries
            too_old = self._max_age > 0 and now - first.appended_at > self._max_age
            if not (too_many or too_old) or (floor is not None and first.sequence > floor):
                break
            self._pruned_through = first.position
            self._head += 1
            pruned += 1
        if self._head > _COMPACT_AFTER and self._head * 2 > len(self._entries):
            del self._entries[: self._head]
            self._head = 0
        return pruned

    def entries_after(self, sequence: int, limit: int) -> list[JournalEntry]:
        """Up to `limit` entries with sequence > `sequence`, oldest first; raises EntriesPruned."""
        first = self.first_retained_sequence
        if sequence + 1 < first:
            raise EntriesPruned(sequence, first)
        start = self._head + (sequence + 1 - first)
        return self._entries[start: start + limit]

    def pin(self, sequence: int) -> int:
        """Keep every entry above `sequence` until unpinned; returns the token for unpin."""
        self._pins[sequence] += 1
        return sequence

    @property
    def pins(self) -> int:
        """Pins held (each keeps the entries above it from being pruned)."""
        return sum(self._pins.values())

    def unpin(self, token: int) -> None:
        self._pins[token] -= 1
        if self._pins[token] <= 0:
            del self._pins[token]

    def resume_after_position(self, position: Position) -> int | None:
        """The sequence to resume after for a client that applied everything up to `position`; None when entries
        after it may have been pruned (or never held): the client needs a snapshot. A client ahead of the journal
        resumes at the current sequence."""
        retained = self._head < len(self._entries)
        covered = (self._pruned_through is not None and position >= self._pruned_through) or (
            retained and self._entries[self._head].position <= position
        )
        if not covered:
            return None
        index = bisect.bisect_right(self._entries, position, lo=self._head, key=_position_of)
        return self._entries[index - 1].sequence if index > self._head else self.first_retained_sequence - 1


def position_reached(applied: Position | None, wanted: Position) -> bool:
    """Whether a replica that applied everything up to `applied` holds every change up to `wanted`. A bare LSN
    (everything at that LSN) counts as reached once a change at that LSN is applied: a transaction arrives whole,
    except a chunked one mid-way, whose later changes a client holding it then gets again."""
    if applied is None:
        return False
    if wanted.ordinal == END_OF_LSN and not wanted.repair:
        return (applied.epoch, applied.lsn) >= (wanted.epoch, wanted.lsn)
    return applied >= wanted


def _position_of(entry: JournalEntry) -> Position:
    return entry.position
