"""The pure parts of rebuilds: speeds, column checks, command and report records, and the hold in front of a sink."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import BatchKind, ChangeBatchInfo, ColumnInfo, TableId
from laredo_core.rebuild.gate import GatedSink
from laredo_core.rebuild.meta import column_differences
from laredo_core.rebuild.pacing import MAX_GAP_SECONDS, ReplaySpeed
from laredo_core.rebuild.records import (
    RebuildKind,
    RebuildPhase,
    RebuildReport,
    RebuildRequest,
    RebuildState,
    outcome_id,
)
from laredo_core.stream.feed import FeedMessage

TABLE = TableId("public", "items")
OTHER = TableId("public", "other")
ID = ColumnInfo("id", 23, "int4", not_null=True, primary_key_ordinal=1)
NAME = ColumnInfo("name", 25, "text")


@pytest.mark.parametrize(("text", "factor"), [("", 0.0), ("full", 0.0), (" FULL ", 0.0), ("realtime", 1.0),
                                              ("10x", 10.0), ("0.5x", 0.5), (".25x", 0.25), ("1x", 1.0)])
def test_speeds_parse(text: str, factor: float) -> None:
    assert ReplaySpeed.parse(text).factor == factor


@pytest.mark.parametrize("text", ["fast", "0x", "-2x", "x", "10", "1e3x", "nanx"])
def test_bad_speeds_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="'full', 'realtime' or '<N>x'"):
        ReplaySpeed.parse(text)


def test_gaps_follow_commit_times_divided_by_the_factor() -> None:
    second = 1_000_000
    assert ReplaySpeed.parse("realtime").gap(10 * second, 12 * second) == 2.0
    assert ReplaySpeed.parse("4x").gap(10 * second, 12 * second) == 0.5
    assert ReplaySpeed.parse("0.01x").gap(10 * second, 10 * second + second // 4) == pytest.approx(25.0)
    assert ReplaySpeed.full().gap(10 * second, 99 * second) == 0.0
    assert ReplaySpeed.parse("realtime").gap(0, 12 * second) == 0.0  # nothing before, or no commit time
    assert ReplaySpeed.parse("realtime").gap(12 * second, 11 * second) == 0.0
    assert ReplaySpeed.parse("0.001x").gap(0 + 1, 10**9 * second) == MAX_GAP_SECONDS


def test_column_differences_name_each_one() -> None:
    assert column_differences((ID, NAME), ("id",), (NAME, ID), ("id",)) == []
    wider = ColumnInfo("name", 1043, "varchar", type_modifier=14)
    differences = column_differences((ID, NAME, ColumnInfo("gone", 23, "int4")), ("id",),
                                     (ColumnInfo("id", 23, "int4", primary_key_ordinal=1), wider,
                                      ColumnInfo("new", 16, "bool")), ("id", "new"))
    assert differences == [
        "column 'gone' is in the snapshot but no longer in the table",
        "column 'id' is NOT NULL in the snapshot but nullable in the table",
        "column 'name' is text in the snapshot but varchar(14) in the table",
        "column 'new' is in the table but not in the snapshot (its rows will lack it)",
        "the key is (id) in the snapshot but (id, new) in the table",
    ]
    assert "not known yet" in column_differences((ID,), ("id",), (), ())[0]


def test_requests_and_reports_round_trip_and_name_what_is_missing() -> None:
    request = RebuildRequest("replay-1", RebuildKind.REPLAY, "snap", TABLE, ReplaySpeed.parse("2x"), True)
    assert RebuildRequest.from_args(RebuildKind.REPLAY, request.to_args()) == request
    with pytest.raises(ValueError, match="lacks snapshot_id, table"):
        RebuildRequest.from_args(RebuildKind.RESTORE, {"rebuild_id": "r", "schema": "public"})
    with pytest.raises(ValueError, match="speed"):
        RebuildRequest.from_args(RebuildKind.REPLAY, {**request.to_args(), "speed": "warp"})
    report = RebuildReport("r", RebuildKind.RESTORE, TABLE, "snap", RebuildState.STOPPED, RebuildPhase.TAIL, 10, 2,
                           1_000, 2_000, "full", "stopped", ("w",))
    assert RebuildReport.from_json("r", report.to_json()) == report
    assert outcome_id("r", "fanout", "f1") == "r@fanout:f1"


def message(table: TableId, sequence: int) -> FeedMessage:
    return FeedMessage(table, ChangeBatchInfo("pg", BatchKind.TRANSACTION, table, (), 0, 0, 0, 0, 0, True), sequence)


class Sink:
    def __init__(self) -> None:
        self.seen: list[tuple[str, TableId, int]] = []

    def on_batch(self, message: FeedMessage) -> None:
        self.seen.append(("batch", message.table, message.stream_sequence))

    def on_caught_up(self, table: TableId) -> None:
        self.seen.append(("caught_up", table, 0))


def test_a_hold_keeps_one_tables_messages_until_released_in_order() -> None:
    sink = Sink()
    gate = GatedSink(sink)
    gate.on_batch(message(TABLE, 1))
    hold = gate.hold(TABLE, limit=10)
    gate.on_batch(message(TABLE, 2))
    gate.on_caught_up(TABLE)
    gate.on_batch(message(OTHER, 3))
    gate.on_batch(message(TABLE, 4))
    assert sink.seen == [("batch", TABLE, 1), ("batch", OTHER, 3)] and gate.applied_sequence(TABLE) == 1
    with pytest.raises(RuntimeError, match="held already"):
        gate.hold(TABLE, 10)
    gate.release(hold)
    gate.release(hold)  # idempotent
    assert sink.seen[2:] == [("batch", TABLE, 2), ("caught_up", TABLE, 0), ("batch", TABLE, 4)]
    assert gate.applied_sequence(TABLE) == 4 and not gate.held(TABLE)


def test_a_full_hold_runs_on_full_then_releases_or_gives_up() -> None:
    sink = Sink()
    gate = GatedSink(sink)
    finished: list[int] = []
    hold = gate.hold(TABLE, limit=2)
    hold.on_full = lambda: finished.append(len(sink.seen))
    for sequence in (1, 2, 3):
        gate.on_batch(message(TABLE, sequence))
    assert finished == [0] and hold.released and not hold.overflowed
    assert [s for _, _, s in sink.seen] == [1, 2, 3]
    plain = gate.hold(TABLE, limit=1)
    gate.on_batch(message(TABLE, 4))
    gate.on_batch(message(TABLE, 5))
    assert plain.overflowed and plain.released and [s for _, _, s in sink.seen] == [1, 2, 3, 4, 5]
    gate.started_after(OTHER, 9)
    assert gate.applied_sequence(OTHER) == 9
