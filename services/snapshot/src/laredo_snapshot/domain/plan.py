"""The compaction plan: what the whole tail means for every key, computed from one summary per message.

It walks the messages as the fan-out replicator applies them and records what a key-by-key fold cannot see:
- replays: a change at or before the position applied so far is skipped (positions are the idempotency key);
  `replay_bounds` holds, for each message that carries such changes, the position they must exceed;
- resets every key goes through, in position order: TRUNCATE (no rows), and the end of a baseline generation
  (BASELINE_END: a row survives only if a baseline row of that generation put it);
- the cut: the snapshot stops after the last message that leaves the table consistent, never inside a
  baseline (BEGIN without END) nor between the chunks of one transaction;
- the columns and key at the cut, and the position and stream sequence the snapshot stands at;
- whether the key-by-key fold is exact: a changed primary key, or a change naming its row by other columns
  than the key, needs the sequential fold (sequential_reason).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from laredo_kernel.changes import BatchKind, ColumnInfo
from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position
from laredo_core.snapshots.format import SnapshotManifest

from laredo_snapshot.domain.records import MessageSummary, key_columns_of, position_pair

PositionTuple = tuple[int, int]


class ResetKind(enum.Enum):
    TRUNCATE = "truncate"
    SWEEP = "sweep"  # the end of a baseline generation


@dataclass(frozen=True, slots=True)
class Reset:
    """A point every key passes: TRUNCATE removes the row; SWEEP keeps it only if a BASELINE_PUT of
    `baseline_id` with `window_after` < position < `position` put it."""

    kind: ResetKind
    position: PositionTuple
    baseline_id: str = ""
    window_after: PositionTuple = (0, 0)


@dataclass(frozen=True, slots=True)
class FoldStart:
    """Where the fold starts: the base snapshot's state, or nothing (the first snapshot of a table)."""

    position: Position | None = None
    columns: tuple[ColumnInfo, ...] = ()
    key_columns: tuple[str, ...] = ()
    stream_sequence: int = 0
    row_count: int = 0

    @classmethod
    def of(cls, manifest: SnapshotManifest | None) -> FoldStart:
        if manifest is None:
            return cls()
        return cls(Position.parse(manifest.source_position), manifest.columns, manifest.key_columns,
                   manifest.stream_sequence, manifest.row_count)


@dataclass(frozen=True, slots=True)
class FoldPlan:
    """last_sequence 0: no message to fold (nothing complete after the start)."""

    last_sequence: int
    position: Position | None
    columns: tuple[ColumnInfo, ...]
    key_columns: tuple[str, ...]
    replay_bounds: Mapping[int, PositionTuple] = field(default_factory=dict)
    resets: tuple[Reset, ...] = ()
    sequential_reason: str = ""
    messages: int = 0
    changes: int = 0

    @property
    def base_needed(self) -> bool:
        """The base snapshot's rows matter only if no reset comes after them."""
        return not self.resets

    def advances(self, start: FoldStart) -> bool:
        """Whether the plan goes beyond the start (a snapshot of the same position would be a copy)."""
        return self.last_sequence > 0 and self.position is not None and self.position != start.position


@dataclass(slots=True)
class _Walk:
    """The replicator's view while walking the messages (mutable; only make_plan uses it)."""

    applied: Position | None
    columns: tuple[ColumnInfo, ...]
    key_columns: tuple[str, ...] | None
    generation: str | None = None  # baseline in progress
    window_after: PositionTuple = (0, 0)
    resets: list[Reset] = field(default_factory=list)
    bounds: dict[int, PositionTuple] = field(default_factory=dict)
    sequential_reason: str = ""
    messages: int = 0
    changes: int = 0

    def accepts(self, position: Position) -> bool:
        return self.applied is None or position > self.applied


def make_plan(start: FoldStart, summaries: Sequence[MessageSummary]) -> FoldPlan:
    """The plan for folding `summaries` (the tail's messages, any order) onto `start`."""
    walk = _Walk(start.position, start.columns, start.key_columns if start.columns else None)
    cut: tuple[int, Position | None, tuple[ColumnInfo, ...], tuple[str, ...], int, str, int, int] = (
        0, start.position, start.columns, start.key_columns, 0, "", 0, 0)
    for summary in sorted(summaries, key=lambda s: s.sequence):
        _adopt_columns(walk, summary)
        _apply(walk, summary)
        walk.messages += 1
        walk.changes += summary.changes
        walk.sequential_reason = walk.sequential_reason or summary.needs_sequential
        if walk.generation is None and (summary.kind is not BatchKind.TRANSACTION or summary.last_chunk):
            cut = (summary.sequence, walk.applied, walk.columns, walk.key_columns or (), len(walk.resets),
                   walk.sequential_reason, walk.messages, walk.changes)
    sequence, position, columns, key_columns, resets, reason, messages, changes = cut
    return FoldPlan(sequence, position, columns, key_columns, {s: b for s, b in walk.bounds.items() if s <= sequence},
                    tuple(walk.resets[:resets]), reason, messages, changes)


def _has_news(walk: _Walk, summary: MessageSummary) -> bool:
    if summary.last_position is not None:
        return walk.accepts(summary.last_position)
    return summary.commit_lsn == 0 or walk.accepts(
        Position(summary.commit_lsn, BASELINE_ORDINAL_BASE - 1, summary.epoch))


def _adopt_columns(walk: _Walk, summary: MessageSummary) -> None:
    if not summary.columns or summary.columns == walk.columns or not _has_news(walk, summary):
        return
    key = key_columns_of(summary.columns)
    if walk.key_columns is not None and key != walk.key_columns:
        walk.sequential_reason = walk.sequential_reason or (
            f"the primary key changed from ({', '.join(walk.key_columns)}) to ({', '.join(key)})")
    walk.columns, walk.key_columns = summary.columns, key


def _apply(walk: _Walk, summary: MessageSummary) -> None:
    kind = summary.kind
    if kind is BatchKind.TRANSACTION or kind is BatchKind.BASELINE_ROWS:
        _apply_changes(walk, summary)
    elif kind is BatchKind.BASELINE_BEGIN:
        begin = Position(summary.commit_lsn, BASELINE_ORDINAL_BASE - 1, summary.epoch)
        if walk.accepts(begin):
            walk.generation, walk.window_after = summary.baseline_id, position_pair(begin)
            walk.applied = begin
    elif kind is BatchKind.BASELINE_END:
        end = Position(summary.commit_lsn, -1, summary.epoch)
        if walk.accepts(end):
            if summary.baseline_id != walk.generation:  # an END without its rows: nothing was seen
                walk.window_after = position_pair(end)
            walk.resets.append(Reset(ResetKind.SWEEP, position_pair(end), summary.baseline_id, walk.window_after))
            walk.generation = None
            walk.applied = end


def _apply_changes(walk: _Walk, summary: MessageSummary) -> None:
    first, last = summary.first_position, summary.last_position
    if first is None or last is None or not walk.accepts(last):
        if first is not None and walk.applied is not None:
            walk.bounds[summary.sequence] = position_pair(walk.applied)  # all replays
        return
    bound = walk.applied
    if bound is not None and not walk.accepts(first):
        walk.bounds[summary.sequence] = position_pair(bound)
    if summary.kind is BatchKind.BASELINE_ROWS and summary.baseline_id != walk.generation:
        # Rows of a generation whose BEGIN was not seen start it (fan-out: apply_baseline_row).
        walk.generation = summary.baseline_id
        walk.window_after = position_pair(bound) if bound is not None else (-2, 0)
    for truncate in summary.truncates:
        if walk.accepts(truncate):
            walk.resets.append(Reset(ResetKind.TRUNCATE, position_pair(truncate)))
    walk.applied = last
