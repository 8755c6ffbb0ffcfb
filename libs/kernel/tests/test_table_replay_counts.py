"""replay() counts the changes of transactions a table took, by action (not baseline rows, replays or refusals),
and keeps the commit time of the newest transaction it took a change of."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, RowChange, TableId
from laredo_kernel.position import Position
from laredo_kernel.table_replay import AppliedCounts, replay

TABLE = TableId("public", "items")


class Refused(Exception):
    pass


@dataclass
class Rows:
    """Takes every change except those whose new row says refuse."""

    applied_position: Position | None = None

    def apply(self, change: RowChange) -> Any:
        if change.new and change.new.get("refuse"):
            raise Refused("no")
        return None

    def apply_baseline_row(self, baseline_id: str, change: RowChange) -> Any:
        return None

    def begin_baseline(self, baseline_id: str) -> None:
        pass

    def end_baseline(self, baseline_id: str) -> list[Any]:
        return []


def batch(kind: BatchKind, lsn: int, *changes: tuple[Action, dict[str, Any] | None]) -> ChangeBatchInfo:
    return ChangeBatchInfo("pg", kind, TABLE, (), lsn, lsn, 1, 1_700_000_000_000_000 + lsn, 0, True,
                           [RowChange(Position(lsn, n), action, None, new) for n, (action, new) in enumerate(changes)],
                           baseline_id="b1" if kind is not BatchKind.TRANSACTION else "")


def test_changes_of_transactions_are_counted_by_action() -> None:
    rows, counts = Rows(), AppliedCounts()
    replay(rows, rows, batch(BatchKind.BASELINE_ROWS, 10, (Action.INSERT, {"id": 1})), _none, counts=counts)
    transaction = batch(BatchKind.TRANSACTION, 20, (Action.INSERT, {"id": 2}), (Action.UPDATE, {"id": 2}),
                        (Action.UPDATE, {"id": 1}), (Action.DELETE, None), (Action.TRUNCATE, None),
                        (Action.INSERT, {"id": 3, "refuse": True}))
    replay(rows, rows, transaction, _none, refused=(Refused,), on_refused=lambda i, e: None, counts=counts)
    replay(rows, rows, transaction, _none, refused=(Refused,), on_refused=lambda i, e: None, counts=counts)
    # the baseline row, the refused insert and the whole replayed message are not counted
    assert counts.report() == {"inserts": 1, "updates": 2, "deletes": 1, "truncates": 1,
                               "last_change_unix_ms": 1_700_000_000_000}  # the transaction's commit time
    refused = batch(BatchKind.TRANSACTION, 30_000, (Action.INSERT, {"id": 4, "refuse": True}))
    replay(rows, rows, refused, _none, refused=(Refused,), on_refused=lambda i, e: None, counts=counts)
    assert counts.last_commit_unix_us == 1_700_000_000_000_020  # nothing of it was taken


def _none(effect: Any, position: Position) -> None:
    pass
