"""The fold's specification as a table: stream messages of one table and the rows they must leave.

Shared by every implementation of the fold: the sequential fold and the key-by-key fold (unit tests), both
compactors on Spark and in one process (contract tests), and fan-out's replicator (tests/ at the top). Each
case may also be folded from any consistent prefix as the base snapshot (`consistent_splits`); the
functions at the end run a case through the sequential fold and through the key-by-key fold in one process.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from services.snapshot.tests.snapshot_testkit import UNCHANGED, Batches, decoded, delete, insert, row, truncate, update

from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.changes import ChangeBatchInfo, ColumnInfo
from laredo_snapshot.domain.key_fold import KeyFoldPlan, fold_key
from laredo_snapshot.domain.plan import FoldPlan, FoldStart, make_plan
from laredo_snapshot.domain.records import encode_row, records_of, row_json, snapshot_record, summarize
from laredo_snapshot.domain.table_fold import TableFold


@dataclass(frozen=True)
class FoldCase:
    """expected: id -> row after the messages up to `last_sequence` (None: all of them); sequential: the
    key-by-key fold must hand it to the sequential fold."""

    name: str
    messages: list[bytes]
    expected: dict[int, dict[str, Any]]
    last_sequence: int | None = None
    sequential: bool = False
    columns: tuple[ColumnInfo, ...] = field(default=())

    def __str__(self) -> str:
        return self.name


def _rows(*ids: int) -> dict[int, dict[str, Any]]:
    return {i: row(i) for i in ids}


def fold_cases() -> list[FoldCase]:
    return [
        _baseline_only(), _mixed_changes(), _primary_key_updates(), _truncate(), _rebaseline_sweeps(),
        _unchanged_toast(), _replays_are_skipped(), _cut_before_unfinished_baseline(),
        _cut_before_unfinished_transaction(), _schema_change(), _end_without_rows(), _deletes_of_absent_rows(),
        _rekey_needs_sequential(), _delete_by_other_columns_needs_sequential(), _empty_table(), _new_epoch(),
    ]


def _in_epoch(epoch: int, messages: list[bytes]) -> list[bytes]:
    out = []
    for data in messages:
        batch = spb.ChangeBatch.FromString(data)
        batch.epoch = epoch
        out.append(batch.SerializeToString())
    return out


def _new_epoch() -> FoldCase:
    """The source's WAL started again lower: the next epoch's baseline and changes have lower LSNs, yet follow."""
    b = Batches()
    messages = b.baseline([row(i) for i in range(1, 6)], chunk_rows=2)
    messages += [b.transaction(insert(row(6)), update(row(2, "two"))), b.transaction(delete({"id": 3}))]
    b.lsn = 0x1000000  # below every position so far
    messages += _in_epoch(1, b.baseline([row(1), row(2), row(3, "restored")], chunk_rows=2))
    messages += _in_epoch(1, [b.transaction(insert(row(9, "after")), update(row(1, "one")))])
    return FoldCase("a new epoch's baseline at lower positions replaces the rows", messages,
                    {1: row(1, "one"), 2: row(2), 3: row(3, "restored"), 9: row(9, "after")})


def _baseline_only() -> FoldCase:
    b = Batches()
    return FoldCase("baseline only", b.baseline([row(i) for i in range(1, 8)], chunk_rows=3), _rows(*range(1, 8)))


def _mixed_changes() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(i) for i in range(1, 6)], chunk_rows=2)
    messages += [b.transaction(insert(row(6)), update(row(2, "two")), delete({"id": 3})),
                 b.transaction(update(row(6, "six")), insert(row(7))),
                 b.transaction(delete({"id": 7}), insert(row(3, "again")), update(row(1, note=None)))]
    return FoldCase("inserts, updates and deletes", messages,
                    {1: row(1, note=None), 2: row(2, "two"), 3: row(3, "again"), 4: row(4), 5: row(5),
                     6: row(6, "six")})


def _primary_key_updates() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(i) for i in range(1, 5)])
    messages += [b.transaction(update(row(20, "moved"), old_key={"id": 2})),
                 b.transaction(update(row(30), old_key={"id": 3}), update(row(3, "back"), old_key={"id": 30})),
                 b.transaction(update(row(1, "swapped"), old_key={"id": 4}))]  # moves onto an existing key
    return FoldCase("primary-key updates move rows", messages,
                    {20: row(20, "moved"), 3: row(3, "back"), 1: row(1, "swapped")})


def _truncate() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(i) for i in range(1, 5)])
    messages += [b.transaction(update(row(1, "x")), truncate(), insert(row(9))),
                 b.transaction(insert(row(10)), update(row(9, "nine")))]
    return FoldCase("TRUNCATE empties the table, later changes stay", messages, {9: row(9, "nine"), 10: row(10)})


def _rebaseline_sweeps() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(i) for i in range(1, 6)])
    messages += [b.transaction(insert(row(6)), update(row(4, "four")))]
    messages += b.baseline([row(1, "one"), row(2), row(3), row(7)], chunk_rows=2)  # 4, 5, 6 are gone
    messages += [b.transaction(insert(row(8)))]
    return FoldCase("a re-baseline removes every row it does not hold", messages,
                    {1: row(1, "one"), 2: row(2), 3: row(3), 7: row(7), 8: row(8)})


def _unchanged_toast() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1, note="big1"), row(2, note="big2")])
    messages += [b.transaction(update(row(1, "a", note=UNCHANGED))),
                 b.transaction(update(row(1, "b", note=UNCHANGED)), update(row(3, "c", note=UNCHANGED))),
                 b.transaction(update(row(2, "x", note="new")), update(row(2, "y", note=UNCHANGED)))]
    return FoldCase("unchanged TOASTed values keep the stored one (or are absent)", messages,
                    {1: row(1, "b", note="big1"), 2: row(2, "y", note="new"), 3: {"id": 3, "name": "c"}})


def _replays_are_skipped() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1), row(2)])
    first = b.transaction(update(row(1, "first")))
    second = b.transaction(update(row(1, "second")), delete({"id": 2}), insert(row(3)))
    third = b.transaction(update(row(1, "third")), delete({"id": 3}))
    messages += [first, second, third, first, second]  # published again after a restart (outside the dedup window)
    return FoldCase("replayed messages change nothing", messages, {1: row(1, "third")})


def _cut_before_unfinished_baseline() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1), row(2)]) + [b.transaction(insert(row(3)))]
    complete = len(messages)
    messages += b.baseline_begin_and_rows([row(1, "later")])
    return FoldCase("the snapshot stops before a baseline that has not ended", messages, _rows(1, 2, 3),
                    last_sequence=complete)


def _cut_before_unfinished_transaction() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1)]) + b.chunks([insert(row(2))], [insert(row(3))])
    complete = len(messages)
    messages += b.chunks([insert(row(4))], [insert(row(5))])[:1]
    return FoldCase("the snapshot stops before a transaction whose last chunk is missing", messages, _rows(1, 2, 3),
                    last_sequence=complete)


def _schema_change() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1), row(2)])
    wider = (*b.columns, ColumnInfo("qty", 23, "int4"))
    messages.append(b.schema_change(wider))
    messages.append(b.transaction(b.insert({**row(3), "qty": 7}), b.update({**row(1, "one"), "qty": 1})))
    return FoldCase("a new column is adopted; older rows keep theirs", messages,
                    {1: {**row(1, "one"), "qty": 1}, 2: row(2), 3: {**row(3), "qty": 7}}, columns=wider)


def _end_without_rows() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1), row(2)]) + [b.end_without_rows(), b.transaction(insert(row(5)))]
    return FoldCase("a baseline END whose rows never came empties the table", messages, {5: row(5)})


def _deletes_of_absent_rows() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1)]) + [b.transaction(delete({"id": 9}), insert(row(1, "again")), delete({"id": 9}))]
    return FoldCase("deleting an absent row and inserting an existing one", messages, {1: row(1, "again")})


def _rekey_needs_sequential() -> FoldCase:
    b = Batches()
    messages = b.baseline([row(1, "a"), row(2, "b")])
    by_name = (ColumnInfo("id", 20, "int8", not_null=True), ColumnInfo("name", 25, "text", is_identity_key=True,
                                                                      primary_key_ordinal=1),
               ColumnInfo("note", 25, "text"))
    messages.append(b.schema_change(by_name))
    messages.append(b.transaction(b.delete({"name": "a"}), b.insert(row(3, "c"))))
    return FoldCase("a new primary key re-keys the rows", messages, {2: row(2, "b"), 3: row(3, "c")}, sequential=True,
                    columns=by_name)


def _delete_by_other_columns_needs_sequential() -> FoldCase:
    # The primary key is id, but the replica identity is a unique index on name: old rows carry only name.
    columns = (ColumnInfo("id", 20, "int8", not_null=True, primary_key_ordinal=1),
               ColumnInfo("name", 25, "text", is_identity_key=True), ColumnInfo("note", 25, "text"))
    b = Batches(columns=columns)
    messages = b.baseline([row(1, "a"), row(2, "b")])
    messages.append(b.transaction(b.delete({"name": "a"}), b.update(row(2, "c"), old_key={"name": "b"})))
    return FoldCase("changes naming their row by the replica identity, not the key", messages, {2: row(2, "c")},
                    sequential=True, columns=columns)


def _empty_table() -> FoldCase:
    b = Batches()
    return FoldCase("an empty baseline", b.baseline([]), {})


# How the folds run a case (decoded messages: (stream sequence, batch)).

Messages = list[tuple[int, ChangeBatchInfo]]


def sequential(messages: Messages, start: TableFold | None = None) -> tuple[TableFold, FoldPlan]:
    fold = start or TableFold()
    plan = make_plan(start_of(fold), [summarize(s, b) for s, b in messages])
    for sequence, batch in messages:
        if sequence <= plan.last_sequence:
            fold.apply(sequence, batch)
    return fold, plan


def by_keys(messages: Messages, base: TableFold | None = None) -> tuple[list[dict[str, Any]], FoldPlan]:
    """The Spark pipeline in one process: records of the tail and the base, grouped by key, folded per key."""
    summaries, groups = [], defaultdict(list)
    for sequence, batch in messages:
        records, summary = records_of(sequence, batch)
        summaries.append(summary)
        for key, value in records:
            groups[key].append(value)
    start = start_of(base) if base is not None else FoldStart()
    plan = make_plan(start, summaries)
    if base is not None and plan.base_needed:
        for values in base.rows.values():
            key, value = snapshot_record(encode_row(values), base.key_columns)
            groups[key].append(value)
    key_plan = KeyFoldPlan.of(plan)
    rows = [row_json(r) for r in (fold_key(values, key_plan) for values in groups.values()) if r is not None]
    return [json.loads(r) for r in rows], plan


def start_of(fold: TableFold) -> FoldStart:
    return FoldStart(fold.applied_position, fold.columns, fold.key_columns, fold.stream_sequence, len(fold.rows))


def consistent_splits(case: FoldCase) -> list[int]:
    """Message counts after which a snapshot may be taken (what fan-out and this service would snapshot)."""
    messages = decoded(case.messages)
    return [k for k in range(len(messages) + 1)
            if k == 0 or make_plan(FoldStart(), [summarize(s, b) for s, b in messages[:k]]).last_sequence == k]
