"""SyncStream message handling (no network): grammar, staging, sequences, readiness and overlap dedupe."""

from __future__ import annotations

from typing import Any

import pytest

from laredo.replication.v1 import replication_pb2 as pb
from laredo_client import ClientOptions, Filter, ProtocolViolation, SequenceGapError
from laredo_client.client_replica import ClientReplica
from laredo_client.stats import ClientStats
from laredo_client.sync_stream import SyncStream
from libs.client.tests.scripted_server import batch, entry, handshake, heartbeat, pos, row, snapshot

OPTIONS = ClientOptions(address="unused:1", schema="public", table="items")


def stream(replica: ClientReplica | None = None, *, primary: bool = True, options: ClientOptions = OPTIONS,
           caught_up: list[str] | None = None) -> SyncStream:
    def on_caught_up(s: SyncStream) -> None:
        if caught_up is not None:
            caught_up.append(s.name)

    return SyncStream(options, replica or ClientReplica(), pb.SyncRequest(), name="s", stats=ClientStats(),
                      on_caught_up=on_caught_up, primary=primary)


def feed(s: SyncStream, *messages: Any) -> None:
    for message in messages:
        for m in message if isinstance(message, list) else [message]:
            s.handle(m)


def test_full_snapshot_is_staged_then_installed_and_typed() -> None:
    s = stream()
    feed(s, handshake("FULL_SNAPSHOT", current=5, resume=5), heartbeat(5))
    assert not s.caught_up.is_set(), "a heartbeat before the snapshot must not count as caught up"
    feed(s, snapshot([row(1), row(2)], sequence=5, position=pos(5))[:-1])
    assert s.replica.rows.rows() == [] and not s.caught_up.is_set()
    feed(s, snapshot([row(1), row(2)], sequence=5, position=pos(5))[-1])
    assert s.caught_up.is_set()
    assert s.replica.rows.get((1,)) == {"id": 1, "name": "n1", "team": "a"}
    assert isinstance(s.replica.rows.get((1,))["id"], int)
    assert (s.replica.cursor.sequence, s.replica.cursor.source_position) == (5, pos(5))
    assert s.stats.modes == ["FULL_SNAPSHOT"]


def test_batched_snapshot_rows_and_journal_batches_apply_like_single_ones() -> None:
    s = stream()
    feed(s, handshake("FULL_SNAPSHOT", current=3, resume=3),
         snapshot([row(i) for i in range(1, 6)], sequence=3, position=pos(3), batch=2),
         batch(entry(4, pos(4), "DELETE", old={"id": 1}), entry(5, pos(5), "INSERT", new=row(9))))
    assert sorted(r["id"] for r in s.replica.rows.rows()) == [2, 3, 4, 5, 9]
    assert s.replica.cursor.sequence == 5


def test_delta_with_nothing_new_is_caught_up_at_the_handshake() -> None:
    caught: list[str] = []
    s = stream(caught_up=caught)
    feed(s, handshake("DELTA", current=40, resume=40))
    assert caught == ["s"] and s.applied_sequence == 40


def test_delta_is_caught_up_once_the_handshake_sequence_is_applied() -> None:
    s = stream()
    feed(s, handshake("DELTA", current=12, resume=10), entry(11, pos(11), "INSERT", new=row(1)))
    assert not s.caught_up.is_set()
    feed(s, entry(12, pos(12), "INSERT", new=row(2)))
    assert s.caught_up.is_set()


def test_a_heartbeat_marks_a_resumed_stream_live_even_below_the_target() -> None:
    s = stream()
    feed(s, handshake("DELTA", current=12, resume=10), heartbeat(12))
    assert s.caught_up.is_set()


@pytest.mark.parametrize("sequence", [11, 13, 10])
def test_gaps_and_repeats_within_a_stream_raise(sequence: int) -> None:
    s = stream()
    feed(s, handshake("DELTA", current=20, resume=10), entry(11, pos(11), "INSERT", new=row(1)))
    with pytest.raises(SequenceGapError, match="expected journal sequence 12"):
        feed(s, entry(sequence, pos(sequence), "INSERT", new=row(2)))
    assert s.replica.rows.get((2,)) is None


def test_filtered_streams_may_skip_sequences_but_not_repeat_them() -> None:
    filtered = ClientOptions(address="unused:1", schema="public", table="items", filters=(Filter.equals("team", "a"),))
    s = stream(options=filtered)
    feed(s, handshake("DELTA", current=20, resume=10), entry(14, pos(14), "INSERT", new=row(1)))
    with pytest.raises(SequenceGapError):
        feed(s, entry(14, pos(14), "INSERT", new=row(1)))


@pytest.mark.parametrize("messages", [
    [entry(1, pos(1), "INSERT", new=row(1))],
    [handshake("FULL_SNAPSHOT", current=1, resume=1), snapshot([row(1)], sequence=1, position=pos(1))[0],
     entry(2, pos(2), "INSERT", new=row(2))],
    [handshake("DELTA", current=1, resume=1), snapshot([row(1)], sequence=1, position=pos(1))[1]],
    [handshake("DELTA", current=1, resume=1), handshake("DELTA", current=1, resume=1)],
])
def test_grammar_violations_raise(messages: list[Any]) -> None:
    with pytest.raises(ProtocolViolation):
        feed(stream(), *messages)


def test_overlapping_streams_apply_each_change_once_and_never_roll_back() -> None:
    replica = ClientReplica()
    events: list[Any] = []
    replica.listen(lambda old, new: events.append(new))
    old, new = stream(replica), stream(replica, primary=False)
    feed(old, handshake("FULL_SNAPSHOT", current=10, resume=10), snapshot([row(1)], sequence=10, position=pos(10)),
         entry(11, pos(11), "UPDATE", new=row(1, "x")))
    # the new stream (another instance: its own sequences) resumes after pos(11) and runs ahead
    feed(new, handshake("DELTA", current=103, resume=100), entry(101, pos(12), "UPDATE", new=row(1, "y")),
         entry(102, pos(13), "UPDATE", new=row(1, "z")))
    feed(old, entry(12, pos(12), "UPDATE", new=row(1, "y")))  # the lagging old stream replays: skipped
    assert replica.rows.get((1,))["name"] == "z"
    assert [e["name"] for e in events] == ["x", "y", "z"]
    assert old.stats.entries_skipped == 1
    assert replica.cursor.sequence == 12, "only the primary (old) stream moves the cursor's sequence"
    new.promote()
    assert replica.cursor.sequence == 102


def test_positions_going_backwards_within_one_stream_are_applied_not_stalled() -> None:
    s = stream()
    feed(s, handshake("DELTA", current=20, resume=10), entry(11, pos(50), "INSERT", new=row(1)),
         entry(12, pos(5), "INSERT", new=row(2)))
    assert s.replica.rows.get((2,)) is not None and s.replica.cursor.source_position == pos(5)


def test_promoting_a_stream_whose_snapshot_is_still_staged_forgets_the_sequence() -> None:
    replica = ClientReplica()
    s = stream(replica, primary=False)
    feed(s, handshake("FULL_SNAPSHOT", current=9, resume=9), snapshot([row(1)], sequence=9, position=pos(9))[0])
    s.promote()
    assert replica.cursor.sequence == 0
