"""Fan-out and query replay dead letters by one rule: given the same stream and the same letters, they keep the
same rows.

Each case is a stream (baseline, then transactions) in which some transactions never reach the tables (they are
the dead letters), then replays of those letters in a given order, possibly with more stream between them. Both
services apply the same messages; at the end their rows are equal, and equal to what the case expects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.feed import FeedMessage
from laredo_fanout.adapters.memory import ManualClock as FanoutClock
from laredo_fanout.adapters.memory import SilentObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.application.dead_letter_replay import FanoutDeadLetterReplay
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica
from laredo_query.adapters.memory import ManualClock as QueryClock
from laredo_query.application.applier import ChangeApplier
from laredo_query.application.dead_letter_replay import QueryDeadLetterReplay
from laredo_query.application.query_table import QueryTable, ReadinessSignal
from laredo_query.application.subscriptions import OverflowPolicy, SubscriberHub
from laredo_query.domain.indexed_table import IndexedTable
from services.fanout.tests.fanout_testkit import TABLE, Batches, delete, insert, row, truncate, update

PIPELINE = PipelineId("pg", TABLE, "replication-fanout")
Rows = dict[int, dict[str, Any]]


class Both:
    """One fan-out replica and one query table fed the same messages; replays go to both."""

    def __init__(self) -> None:
        encoder = ProtobufSyncEncoder()
        self.replica = TableReplica("pg", TABLE, ReplicaLimits(10_000, 0.0, 5.0, 0), encoder)
        self.replicator = Replicator({TABLE: self.replica}, encoder, FanoutClock(), SilentObserver())
        self.fanout_replay = FanoutDeadLetterReplay({TABLE: self.replica}, encoder, FanoutClock(),
                                                    partial(decode_batch, json_values=True))
        self.table = QueryTable("pg", TABLE, IndexedTable(str(TABLE), ()), SubscriberHub(str(TABLE), 16,
                                                                                          OverflowPolicy.DROP),
                                ReadinessSignal())
        self.applier = ChangeApplier({TABLE: self.table}, QueryClock())
        self.query_replay = QueryDeadLetterReplay({TABLE: self.table}, QueryClock(),
                                                  partial(decode_batch, json_values=True))
        self.sequence = 0
        self.outcomes: list[tuple[dict[str, str], dict[str, str]]] = []

    def stream(self, *messages: bytes) -> None:
        for data in messages:
            self.sequence += 1
            self.replicator.on_batch(FeedMessage(TABLE, decode_batch(data, json_values=True), self.sequence))
            self.applier.on_batch(FeedMessage(TABLE, decode_batch(data, json_values=True), self.sequence))

    def replay(self, *letters: DeadLetter) -> None:
        fanout = self.fanout_replay.replay(self.replica, PIPELINE, list(letters))
        query = self.query_replay.replay(self.table, PIPELINE, list(letters))
        self.outcomes.append(({k: v.value for k, v in fanout.outcomes.items()},
                              {k: v.value for k, v in query.outcomes.items()}))

    def fanout_rows(self) -> Rows:
        state = self.replica.state
        return {state.values_of(r)["id"]: dict(state.values_of(r)) for r in state.rows()}

    def query_rows(self) -> Rows:
        return {r.values["id"]: dict(r.values) for r in self.table.indexed.rows()}


def letter(name: str, data: bytes) -> DeadLetter:
    return DeadLetter(PIPELINE, name, "refused earlier", data, 0)


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Both, Batches], None]
    expected: Rows

    def __str__(self) -> str:
        return self.name


def _update_of_a_baseline_row(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1), row(2)]))
    lost = letter("u1", b.transaction(update(row(1, "lost update"))))
    both.stream(b.transaction(update(row(2, "later"))))
    both.replay(lost)


def _insert_over_an_older_row(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1)]))
    lost = letter("i1", b.transaction(insert(row(1, "newer"))))
    both.replay(lost)


def _update_overtaken_by_a_later_update(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1)]))
    lost = letter("u1", b.transaction(update(row(1, "stale"))))
    both.stream(b.transaction(update(row(1, "fresh"))))
    both.replay(lost)


def _two_letters_of_one_row_in_order_then_again(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1)]))
    first = letter("u1", b.transaction(update(row(1, "first"))))
    second = letter("u2", b.transaction(update(row(1, "second"))))
    both.stream(b.transaction(insert(row(3))))
    both.replay(first, second)
    both.replay(first)  # once more: superseded by the second


def _two_letters_of_one_row_out_of_order(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1)]))
    first = letter("u1", b.transaction(update(row(1, "first"))))
    second = letter("u2", b.transaction(update(row(1, "second"))))
    both.replay(second, first)


def _delete_of_an_untouched_row_and_of_an_updated_one(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1), row(2)]))
    gone = letter("d1", b.transaction(delete({"id": 1})))
    kept = letter("d2", b.transaction(delete({"id": 2})))
    both.stream(b.transaction(update(row(2, "after the delete"))))
    both.replay(gone, kept)


def _missing_insert_then_more_stream(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1)]))
    lost = letter("i5", b.transaction(insert(row(5))))
    both.replay(lost)
    both.stream(b.transaction(update(row(5, "after the replay"))), b.transaction(insert(row(6))))
    both.replay(lost)


def _truncates(both: Both, b: Batches) -> None:
    both.stream(*b.baseline([row(1)]))
    overtaken = letter("t1", b.transaction(truncate()))
    both.stream(b.transaction(insert(row(2))))
    both.replay(overtaken)
    last = letter("t2", b.transaction(truncate()))
    both.replay(last)


CASES = [
    Case("an update of a baseline row", _update_of_a_baseline_row, {1: row(1, "lost update"), 2: row(2, "later")}),
    Case("an insert over an older row", _insert_over_an_older_row, {1: row(1, "newer")}),
    Case("an update overtaken by a later one", _update_overtaken_by_a_later_update, {1: row(1, "fresh")}),
    Case("two letters of one row, in order, then again", _two_letters_of_one_row_in_order_then_again,
         {1: row(1, "second"), 3: row(3)}),
    Case("two letters of one row, out of order", _two_letters_of_one_row_out_of_order, {1: row(1, "second")}),
    Case("deletes of an untouched and of an updated row", _delete_of_an_untouched_row_and_of_an_updated_one,
         {2: row(2, "after the delete")}),
    Case("a missing insert, then more stream", _missing_insert_then_more_stream,
         {1: row(1), 5: row(5, "after the replay"), 6: row(6)}),
    Case("truncates before and after the last change", _truncates, {}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fanout_and_query_replay_dead_letters_alike(case: Case) -> None:
    both = Both()
    case.run(both, Batches())
    assert both.fanout_rows() == both.query_rows() == case.expected
    for fanout, query in both.outcomes:
        assert fanout == query, "each letter has the same outcome in both services"


def test_fanout_journals_every_replayed_change_after_the_applied_stream_change() -> None:
    both, b = Both(), Batches()
    _two_letters_of_one_row_in_order_then_again(both, b)
    journal = both.replica.journal
    entries = journal.entries_after(journal.first_retained_sequence - 1, 100)
    stream_change = entries[-3].position
    assert [e.position for e in entries[-2:]] == [stream_change.next_repair(), stream_change.next_repair().next_repair()]
    assert journal.resume_after_position(stream_change) == entries[-3].sequence, "a resuming client gets both"
