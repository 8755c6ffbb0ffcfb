"""Stream messages applied to one table's rows, in the stream's order: the rules around the table core (pure).

Fan-out's replicator and the snapshot service's sequential fold both apply a table's messages with these
rules, so a snapshot folded from the stream holds exactly the rows fan-out holds at the same position:
- positions are the idempotency key: a change at or before the applied position is a replay and is skipped
  (and counted, for the caller to say so loudly);
- control messages get positions that sort where the stream puts them: BASELINE_BEGIN just before the
  baseline's first row, the deletes of BASELINE_END just before the first change committed at the baseline's
  snapshot LSN;
- every message carries the table's columns: they are adopted when they differ and the message brings news
  (a replayed message carries old columns); a new primary key re-keys the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, ColumnInfo, RowChange
from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position


class RowTable(Protocol):
    """The rows a message is applied to (laredo_kernel.table_core.TableCore, or a sink over one)."""

    def apply(self, change: RowChange) -> Any: ...

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> Any: ...

    def begin_baseline(self, baseline_id: str) -> None: ...

    def end_baseline(self, baseline_id: str) -> list[Any]: ...


class Cursor(Protocol):
    """How far the stream is applied: every change up to `applied_position` (None: nothing yet)."""

    applied_position: Position | None


@dataclass(slots=True)
class Replayed:
    """What applying one message did besides its effects."""

    skipped: int = 0  # changes at or before the applied position: replays
    applied_before: Position | None = None
    baseline_ended: bool = False


class AppliedCounts:
    """The changes of transactions a table took since it was set up, by action (baseline rows not counted),
    and the source commit time of the newest transaction it took a change of; a replay (skipped) or a refused
    change is not counted. Status reports show them."""

    __slots__ = ("inserts", "updates", "deletes", "truncates", "last_commit_unix_us")

    def __init__(self) -> None:
        self.inserts = self.updates = self.deletes = self.truncates = 0
        self.last_commit_unix_us = 0  # 0 = no change taken yet

    @property
    def total(self) -> int:
        return self.inserts + self.updates + self.deletes + self.truncates

    def add(self, action: Action) -> None:
        if action is Action.INSERT:
            self.inserts += 1
        elif action is Action.UPDATE:
            self.updates += 1
        elif action is Action.DELETE:
            self.deletes += 1
        else:
            self.truncates += 1

    def report(self) -> dict[str, int]:
        return {"inserts": self.inserts, "updates": self.updates, "deletes": self.deletes,
                "truncates": self.truncates, "last_change_unix_ms": self.last_commit_unix_us // 1000}


def accepts(cursor: Cursor, position: Position) -> bool:
    """Whether a change at `position` is new."""
    applied = cursor.applied_position
    return applied is None or position > applied


def has_news(cursor: Cursor, batch: ChangeBatchInfo) -> bool:
    """Whether the message goes beyond the applied position (its last change, or its LSN for control)."""
    if batch.changes:
        return accepts(cursor, batch.changes[-1].position)
    return batch.commit_lsn == 0 or accepts(cursor, batch.position(BASELINE_ORDINAL_BASE - 1))


def columns_to_adopt(cursor: Cursor, columns: tuple[ColumnInfo, ...],
                     batch: ChangeBatchInfo) -> tuple[ColumnInfo, ...] | None:
    """The message's columns when they replace `columns`; None when they do not (the same, or a replay)."""
    if not batch.columns or batch.columns == columns or not has_news(cursor, batch):
        return None
    return batch.columns


#: Called with each effect of a message and the position it sorts at.
OnEffect = Callable[[Any, Position], None]
#: Called with a change the rows refused (its index in the message) and why; applying goes on.
OnRefused = Callable[[int, Exception], None]
#: Called with each change the rows took, whether it changed anything or not.
OnApplied = Callable[[RowChange], None]


def replay(table: RowTable, cursor: Cursor, batch: ChangeBatchInfo, on_effect: OnEffect, *,
           refused: tuple[type[Exception], ...] = (), on_refused: OnRefused | None = None,
           on_applied: OnApplied | None = None, counts: AppliedCounts | None = None) -> Replayed:
    """Apply one message of the table (its columns already adopted); the cursor follows every position.

    A change raising one of `refused` goes to `on_refused` instead (a dead letter); its position still counts
    as applied. Effects that are None (nothing changed) are not reported. `counts` counts the changes of
    transactions the rows took.
    """
    kind, outcome = batch.kind, Replayed(applied_before=cursor.applied_position)
    if kind is BatchKind.TRANSACTION or kind is BatchKind.BASELINE_ROWS:
        baseline = kind is BatchKind.BASELINE_ROWS
        counted = counts.total if counts is not None else 0
        for index, change in enumerate(batch.changes):
            applied = cursor.applied_position  # accepts(), written out: this runs for every change
            if applied is not None and not change.position > applied:
                outcome.skipped += 1
                continue
            try:
                effect = table.apply_baseline_row(batch.baseline_id, change) if baseline else table.apply(change)
            except refused as exc:
                if on_refused is None:
                    raise
                on_refused(index, exc)
                effect = None
            else:
                if on_applied is not None:
                    on_applied(change)
                if counts is not None and not baseline:
                    counts.add(change.action)
            cursor.applied_position = change.position
            if effect is not None:
                on_effect(effect, change.position)
        if counts is not None and counts.total != counted:
            counts.last_commit_unix_us = max(counts.last_commit_unix_us, batch.commit_time_unix_us)
    elif kind is BatchKind.BASELINE_BEGIN:
        begin = batch.position(BASELINE_ORDINAL_BASE - 1)
        if accepts(cursor, begin):
            table.begin_baseline(batch.baseline_id)
            cursor.applied_position = begin
    elif kind is BatchKind.BASELINE_END:
        end = batch.position(-1)
        if accepts(cursor, end):
            effects = table.end_baseline(batch.baseline_id)
            for index, effect in enumerate(effects):
                # ordinals -n .. -1: after every baseline row, before every change at the snapshot LSN
                on_effect(effect, batch.position(index - len(effects)))
            cursor.applied_position = end
            outcome.baseline_ended = True
    return outcome
