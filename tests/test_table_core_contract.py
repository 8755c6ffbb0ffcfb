"""The table core's rules, run against every sink built on it: the kernel's TableCore itself, fan-out's
TableState, query's RowStore and the snapshot service's sequential fold. One implementation of the rules
(laredo_kernel.table_core); this suite keeps every sink honest to it. The client library's replica is the last
sink: it receives fan-out's effects as the journal entries fan-out sends, decoded and applied by the client's
own code, and must end up holding the same rows.

The message-level rules (laredo_kernel.table_replay: replays skipped by position, columns adopted, baseline
control messages) are run the same way: every case of the fold specification (services/snapshot/tests/
fold_spec.py) against fan-out's replicator, query's applier and the snapshot service's sequential fold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from services.snapshot.tests.fold_spec import FoldCase, fold_cases, sequential
from services.snapshot.tests.snapshot_testkit import SOURCE, TABLE, canonical, decoded

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_client.client_replica import ClientReplica
from laredo_client.options import ClientOptions
from laredo_client.stats import ClientStats
from laredo_client.stream_applier import StreamApplier
from laredo_kernel.changes import Action, BatchKind, ChangeBatchInfo, ColumnInfo, RowChange, TableId
from laredo_kernel.position import BASELINE_ORDINAL_BASE, Position
from laredo_kernel.table_core import ColumnsKey, PlainRow, TableCore
from laredo_kernel.tuples import UNCHANGED
from laredo_core.stream.feed import FeedMessage
from laredo_fanout.adapters.memory import ManualClock, SilentObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder, column_definitions
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica
from laredo_fanout.domain.table_state import TableState
from laredo_query.adapters.memory import ManualClock as QueryClock
from laredo_query.application.applier import ChangeApplier
from laredo_query.application.query_table import QueryTable, ReadinessSignal
from laredo_query.application.subscriptions import OverflowPolicy, SubscriberHub
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.domain.keys import KeyKind, KeySpec
from laredo_query.domain.row_store import RowStore
from laredo_snapshot.domain.table_fold import TableFold

P = Position(1, 0)
COLUMNS = (ColumnInfo("id", 23, "int4", primary_key_ordinal=1), ColumnInfo("v", 25, "text"),
           ColumnInfo("big", 25, "text"))


class Sink:
    """A sink seen through the core's operations; rows() as plain dicts sorted by id."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def apply(self, change: RowChange) -> None:
        self.table.apply(change)

    def baseline(self, baseline_id: str, rows: list[dict[str, Any]], *, begin: bool = True) -> None:
        if begin:
            self.table.begin_baseline(baseline_id)
        for row in rows:
            self.table.apply_baseline_row(baseline_id, RowChange(P, Action.INSERT, None, row))
        self.table.end_baseline(baseline_id)

    def rows(self) -> list[dict[str, Any]]:
        return sorted((dict(self.table.values_of(r)) for r in self.table.rows()), key=lambda r: r["id"])


class FoldSink(Sink):
    """The snapshot fold takes stream messages: each change is one transaction at the next position."""

    def __init__(self) -> None:
        super().__init__(TableFold())
        self.lsn = 0

    def _message(self, kind: BatchKind, changes: list[RowChange], baseline_id: str = "") -> None:
        self.lsn += 1
        first = BASELINE_ORDINAL_BASE if kind is BatchKind.BASELINE_ROWS else 0
        stamped = [RowChange(Position(self.lsn, first + i), c.action, c.old, c.new) for i, c in enumerate(changes)]
        batch = ChangeBatchInfo("source", kind, TableId("public", "t"), COLUMNS, self.lsn, self.lsn, 1, 0, 0, True,
                                stamped, baseline_id=baseline_id)
        self.table.apply(self.lsn, batch)

    def apply(self, change: RowChange) -> None:
        self._message(BatchKind.TRANSACTION, [change])

    def baseline(self, baseline_id: str, rows: list[dict[str, Any]], *, begin: bool = True) -> None:
        if begin:
            self._message(BatchKind.BASELINE_BEGIN, [], baseline_id)
        self._message(BatchKind.BASELINE_ROWS, [RowChange(P, Action.INSERT, None, r) for r in rows], baseline_id)
        self._message(BatchKind.BASELINE_END, [], baseline_id)

    def rows(self) -> list[dict[str, Any]]:
        return sorted((dict(v) for v in self.table.rows.values()), key=lambda r: r["id"])


class ClientSink(Sink):
    """Fan-out's TableState, each effect sent on as the journal entry fan-out writes to the client library's
    replica (its StreamApplier decodes and applies the bytes, as on a live stream)."""

    def __init__(self) -> None:
        super().__init__(TableState(("id",), ENCODER.encode_row, ENCODER.decode_row))
        self.replica = ClientReplica()
        self.stream = StreamApplier(ClientOptions("localhost:1", "public", "t"), self.replica, name="contract",
                                    stats=ClientStats(), on_caught_up=lambda _: None, primary=True)
        self.stream.handle_bytes(rpb.SyncResponse(handshake=rpb.SyncHandshake(
            mode=rpb.SYNC_MODE_DELTA, columns=column_definitions(COLUMNS))).SerializeToString())
        self.sequence = 0

    def _send(self, effect: Any) -> None:
        if effect is None:
            return
        self.sequence += 1
        self.stream.handle_bytes(ENCODER.journal_entry(
            sequence=self.sequence, position=str(Position(self.sequence, 0)), commit_time_unix_us=0, xid=0,
            action=effect.action, old=effect.old, new=effect.new))

    def apply(self, change: RowChange) -> None:
        self._send(self.table.apply(change))

    def baseline(self, baseline_id: str, rows: list[dict[str, Any]], *, begin: bool = True) -> None:
        if begin:
            self.table.begin_baseline(baseline_id)
        for row in rows:
            self._send(self.table.apply_baseline_row(baseline_id, RowChange(P, Action.INSERT, None, row)))
        for effect in self.table.end_baseline(baseline_id):
            self._send(effect)

    def rows(self) -> list[dict[str, Any]]:
        core = sorted((dict(self.table.values_of(r)) for r in self.table.rows()), key=lambda r: r["id"])
        held = sorted((dict(row) for _, row in self.replica.rows.items()), key=lambda r: r["id"])
        assert held == core, "the client's replica differs from the fan-out rows it was sent"
        return held


ENCODER = ProtobufSyncEncoder()
SINKS: dict[str, Callable[[], Sink]] = {
    "kernel-core": lambda: Sink(TableCore(ColumnsKey(("id",)), PlainRow)),
    "fanout-table-state": lambda: Sink(TableState(("id",), ENCODER.encode_row, ENCODER.decode_row)),
    "query-row-store": lambda: Sink(RowStore(KeySpec(("id",), (KeyKind.INTEGER,)))),
    "snapshot-fold": FoldSink,
    "client-replica": ClientSink,
}


@pytest.fixture(params=list(SINKS))
def sink(request: pytest.FixtureRequest) -> Sink:
    return SINKS[request.param]()


def ins(row: dict[str, Any]) -> RowChange:
    return RowChange(P, Action.INSERT, None, row)


def upd(row: dict[str, Any], old: dict[str, Any] | None = None) -> RowChange:
    return RowChange(P, Action.UPDATE, old, row)


def delete(old: dict[str, Any]) -> RowChange:
    return RowChange(P, Action.DELETE, old, None)


def test_applying_a_change_twice_is_applying_it_once(sink: Sink) -> None:
    for _ in range(2):
        sink.apply(ins({"id": 1, "v": "a"}))
        sink.apply(upd({"id": 1, "v": "b"}))
    assert sink.rows() == [{"id": 1, "v": "b"}]


def test_an_unchanged_toasted_value_keeps_the_stored_one(sink: Sink) -> None:
    sink.apply(ins({"id": 1, "v": "a", "big": "x" * 3000}))
    sink.apply(upd({"id": 1, "v": "b", "big": UNCHANGED}))
    sink.apply(upd({"id": 2, "v": "c", "big": UNCHANGED}))  # no stored row: left out, never invented
    assert sink.rows() == [{"id": 1, "v": "b", "big": "x" * 3000}, {"id": 2, "v": "c"}]


def test_a_new_primary_key_moves_the_row_and_a_replayed_move_is_harmless(sink: Sink) -> None:
    sink.apply(ins({"id": 1, "v": "a", "big": "keep"}))
    for _ in range(2):
        sink.apply(upd({"id": 2, "v": "a", "big": UNCHANGED}, old={"id": 1}))
    assert sink.rows() == [{"id": 2, "v": "a", "big": "keep"}]


def test_a_move_onto_another_rows_key_replaces_that_row(sink: Sink) -> None:
    sink.apply(ins({"id": 1, "v": "a"}))
    sink.apply(ins({"id": 2, "v": "b"}))
    sink.apply(upd({"id": 2, "v": "moved"}, old={"id": 1}))
    assert sink.rows() == [{"id": 2, "v": "moved"}]


@pytest.mark.parametrize("name", ["kernel-core", "fanout-table-state", "query-row-store"])
def test_insert_new_adds_what_an_insert_of_a_new_key_adds_and_refuses_a_held_key(name: str) -> None:
    loaded, applied = SINKS[name](), SINKS[name]()
    applied.apply(ins({"id": 1, "v": "a"}))
    applied.apply(ins({"id": 2, "v": "b"}))
    assert loaded.table.insert_new({"id": 1, "v": "a"}, P) is not None
    assert loaded.table.insert_new({"id": 2, "v": "b"}, P) is not None
    assert loaded.table.insert_new({"id": 1, "v": "c"}, P) is None  # held: nothing changes
    assert loaded.rows() == applied.rows() == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert [r.position for r in loaded.table.rows()] == [r.position for r in applied.table.rows()]


def test_delete_by_key_or_by_the_whole_old_row(sink: Sink) -> None:
    for i in (1, 2, 3):
        sink.apply(ins({"id": i, "v": f"v{i}"}))
    sink.apply(delete({"id": 1}))
    sink.apply(delete({"v": "v2"}))  # REPLICA IDENTITY FULL without the key column: found by its values
    sink.apply(delete({"id": 9}))  # nothing there: nothing happens
    assert sink.rows() == [{"id": 3, "v": "v3"}]


def test_truncate_empties_the_table(sink: Sink) -> None:
    sink.apply(ins({"id": 1, "v": "a"}))
    sink.apply(RowChange(P, Action.TRUNCATE, None, None))
    assert sink.rows() == []


def test_a_baseline_generation_removes_at_its_end_every_row_it_did_not_contain(sink: Sink) -> None:
    for i in (1, 2, 3):
        sink.apply(ins({"id": i, "v": "old"}))
    sink.baseline("b1", [{"id": 2, "v": "new"}, {"id": 4, "v": "new"}])
    assert sink.rows() == [{"id": 2, "v": "new"}, {"id": 4, "v": "new"}]


def test_baseline_rows_whose_begin_was_not_seen_start_the_generation(sink: Sink) -> None:
    sink.apply(ins({"id": 1, "v": "old"}))
    sink.baseline("b2", [{"id": 5, "v": "new"}], begin=False)
    assert sink.rows() == [{"id": 5, "v": "new"}]


@pytest.mark.parametrize("name", [name for name in SINKS if name not in ("snapshot-fold", "client-replica")])
def test_a_row_without_its_key_value_is_refused_naming_the_column(name: str) -> None:
    sink = SINKS[name]()
    with pytest.raises(Exception, match="key column"):
        sink.apply(upd({"id": UNCHANGED, "v": "b"}))
    assert sink.rows() == []


def test_the_fold_skips_a_row_without_its_key_value_as_fanout_does() -> None:
    """Fan-out's replicator keeps such a change as a dead letter and goes on; the fold skips and counts it."""
    fold = FoldSink()
    fold.apply(ins({"id": 1, "v": "a"}))
    fold.apply(upd({"id": UNCHANGED, "v": "b"}))
    fold.apply(ins({"id": 2, "v": "c"}))
    assert fold.rows() == [{"id": 1, "v": "a"}, {"id": 2, "v": "c"}]
    assert fold.table.keyless == 1


# The message-level rules, by the fold specification's cases

CASES = fold_cases()


def fanout_replay(messages: list[tuple[int, ChangeBatchInfo]]) -> list[Mapping[str, Any]]:
    encoder = ProtobufSyncEncoder()
    replica = TableReplica(SOURCE, TABLE, ReplicaLimits(1_000_000, 0.0, 5.0, 0), encoder)
    replicator = Replicator({TABLE: replica}, encoder, ManualClock(), SilentObserver())
    for sequence, batch in messages:
        replicator.on_batch(FeedMessage(TABLE, batch, sequence))
    return [replica.state.values_of(r) for r in replica.state.rows()]


def query_replay(messages: list[tuple[int, ChangeBatchInfo]]) -> list[Mapping[str, Any]]:
    table = QueryTable("pg", TABLE, IndexedTable(str(TABLE), ()), SubscriberHub(str(TABLE), 16, OverflowPolicy.DROP),
                       ReadinessSignal())
    applier = ChangeApplier({TABLE: table}, QueryClock())
    for sequence, batch in messages:
        applier.on_batch(FeedMessage(TABLE, batch, sequence))
    return [r.values for r in table.indexed.rows()]


def fold_replay(messages: list[tuple[int, ChangeBatchInfo]]) -> list[Mapping[str, Any]]:
    fold, _ = sequential(messages)
    return fold.row_values()


@pytest.mark.parametrize("replay", [fanout_replay, query_replay, fold_replay],
                         ids=["fanout-replicator", "query-applier", "snapshot-fold"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_stream_is_applied_as_the_fold_specification_says(case: FoldCase, replay: Any) -> None:
    messages = decoded(case.messages)
    cut = case.last_sequence or len(messages)
    assert canonical(replay(messages[:cut])) == canonical(case.expected.values())
