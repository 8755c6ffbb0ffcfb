"""Stream messages and snapshot rows as fold records: one per row version, keyed by primary key.

A distributed fold groups records by key and folds each key on its own (key_fold.py), so everything it needs
about a row travels in its record; what concerns the whole table (replays, TRUNCATE, baseline sweeps, columns,
where to stop) travels in one MessageSummary per message and becomes the FoldPlan (plan.py).

A record is `(key, value)` with `value = (lsn, ordinal, sub, sequence, op, row, unchanged, baseline_id)`:
- lsn, ordinal: the change's position (position_pair: the epoch rides above the LSN's 64 bits); snapshot
  rows sort before everything (BASE_POSITION);
- sub: orders the two records of a primary-key move (0 the DELETE of the old key, 1 the PUT of the new);
- sequence: the stream sequence of its message (0 for snapshot rows);
- op: an Op value;
- row: the row as one JSON object (the snapshot line), None for a DELETE;
- unchanged: names of unchanged TOASTed columns (null in `row`, kept in column order), or None;
- baseline_id: the baseline generation of a BASELINE_PUT, "" otherwise.
Plain tuples, not objects: millions of them are pickled between Spark's JVM and Python workers.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, ColumnInfo
from laredo_kernel.position import Position
from laredo_kernel.table_core import MissingKeyValue, key_values
from laredo_kernel.tuples import UNCHANGED

from laredo_snapshot.domain.errors import CompactionFailed

Key = tuple[Any, ...]
RecordValue = tuple[int, int, int, int, int, str | None, tuple[str, ...] | None, str]
Record = tuple[Key, RecordValue]

LSN, ORDINAL, SUB, SEQUENCE, OP, ROW, UNCHANGED_NAMES, BASELINE_ID = range(8)
BASE_POSITION = (-1, 0)  # snapshot rows: before every change


class Op(enum.IntEnum):
    PUT = 0  # insert or update: the row at this key is now `row` (merged with the stored one if partial)
    DELETE = 1  # no row at this key
    BASELINE_PUT = 2  # a baseline row: a PUT that also marks the key as present in its baseline generation


#: The snapshot format's JSON encoding (laredo_core.snapshots.format.encode_rows), one row at a time.
encode_row = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


@dataclass(frozen=True, slots=True)
class MessageSummary:
    """What the plan needs to know about one stream message of the table (records carry the rest)."""

    sequence: int
    kind: BatchKind
    commit_lsn: int
    baseline_id: str
    last_chunk: bool
    columns: tuple[ColumnInfo, ...]
    first_position: Position | None  # of its first change (None: no changes)
    last_position: Position | None
    truncates: tuple[Position, ...] = ()
    changes: int = 0
    #: Why this message cannot be folded key by key ("": it can), e.g. a DELETE naming its row by other columns.
    needs_sequential: str = ""
    epoch: int = 0  # of commit_lsn (Position.epoch)


def key_columns_of(columns: Sequence[ColumnInfo]) -> tuple[str, ...]:
    """The primary key in key order; the replica identity key without one (as ChangeBatchInfo.key_columns)."""
    pk = sorted((c for c in columns if c.primary_key_ordinal), key=lambda c: c.primary_key_ordinal)
    if pk:
        return tuple(c.name for c in pk)
    return tuple(c.name for c in columns if c.is_identity_key)


def key_of(values: Mapping[str, Any], key_columns: tuple[str, ...]) -> Key:
    """The row's key as fan-out computes it (laredo_kernel.table_core.key_values)."""
    try:
        return key_values(values, key_columns)
    except MissingKeyValue as exc:
        raise CompactionFailed(str(exc)) from None


def snapshot_record(line: str, key_columns: tuple[str, ...]) -> Record:
    """One line of a snapshot part as a record (the line is kept as it is: no re-encoding)."""
    return key_of(json.loads(line), key_columns), (*BASE_POSITION, 0, 0, Op.PUT.value, line, None, "")


def records_of(sequence: int, batch: ChangeBatchInfo) -> tuple[list[Record], MessageSummary]:
    """The records of one decoded message (values JSON-compatible) and its summary."""
    records: list[Record] = []
    needs_sequential = ""
    key_columns = batch.key_columns
    baseline = batch.kind is BatchKind.BASELINE_ROWS
    if batch.kind is BatchKind.TRANSACTION or baseline:
        for change in batch.changes:
            why = _add_records(records, sequence, change, key_columns, baseline, batch.baseline_id)
            needs_sequential = needs_sequential or why
    return records, summarize(sequence, batch, needs_sequential)


def position_pair(position: Position) -> tuple[int, int]:
    """(LSN with the epoch above its 64 bits, ordinal): a stream position as a plain pair that orders as
    positions do (stream changes carry no repair count)."""
    return (position.epoch << 64 | position.lsn, position.ordinal)


def summarize(sequence: int, batch: ChangeBatchInfo, needs_sequential: str = "") -> MessageSummary:
    """The summary of one message (alone, without building its records: the sequential fold's plan)."""
    changes = batch.changes
    return MessageSummary(sequence, batch.kind, batch.commit_lsn, batch.baseline_id, batch.last_chunk,
                          batch.columns, changes[0].position if changes else None,
                          changes[-1].position if changes else None, _truncates(batch), len(changes),
                          needs_sequential, batch.epoch)


def _truncates(batch: ChangeBatchInfo) -> tuple[Position, ...]:
    if batch.kind is not BatchKind.TRANSACTION:
        return ()
    return tuple(c.position for c in batch.changes if c.action is Action.TRUNCATE)


def _add_records(records: list[Record], sequence: int, change: Any, key_columns: tuple[str, ...], baseline: bool,
                 baseline_id: str) -> str:
    """Append the records of one change; returns why it needs the sequential fold ("" when it does not)."""
    lsn, ordinal = position_pair(change.position)
    action = change.action
    if action is Action.TRUNCATE:
        return ""
    if action is Action.DELETE:
        old = change.old or {}
        if not _names_key(old, key_columns):
            return "a DELETE names its row by columns other than the key (replica identity)"
        records.append((key_of(old, key_columns), (lsn, ordinal, 0, sequence, Op.DELETE.value, None, None, "")))
        return ""
    new = change.new or {}
    row, unchanged = _row_text(new)
    if unchanged is not None and any(c in unchanged for c in key_columns):
        return "a key column holds an unchanged TOASTed value"
    key = key_of(new, key_columns)
    if baseline:
        records.append((key, (lsn, ordinal, 0, sequence, Op.BASELINE_PUT.value, row, None, baseline_id)))
        return ""
    old = change.old
    if old:
        if not _names_key(old, key_columns):
            return "an UPDATE names its old row by columns other than the key (replica identity)"
        old_key = key_of(old, key_columns)
        if old_key != key:
            if unchanged is not None:
                return "a primary-key update keeps an unchanged TOASTed value (it comes from the old key's row)"
            records.append((old_key, (lsn, ordinal, 0, sequence, Op.DELETE.value, None, None, "")))
            records.append((key, (lsn, ordinal, 1, sequence, Op.PUT.value, row, None, "")))
            return ""
    records.append((key, (lsn, ordinal, 0, sequence, Op.PUT.value, row, unchanged, "")))
    return ""


def _names_key(values: Mapping[str, Any], key_columns: tuple[str, ...]) -> bool:
    return all(c in values for c in key_columns)


def _row_text(new: Mapping[str, Any]) -> tuple[str, tuple[str, ...] | None]:
    """The row's JSON; unchanged TOASTed values become null in place and are named in the second item."""
    unchanged = tuple(name for name, value in new.items() if value is UNCHANGED)
    if not unchanged:
        return encode_row(new), None
    return encode_row({name: (None if value is UNCHANGED else value) for name, value in new.items()}), unchanged


def row_json(row: str | dict[str, Any]) -> str:
    """A folded row as its snapshot line (without the newline)."""
    return row if type(row) is str else encode_row(row)
