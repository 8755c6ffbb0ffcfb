"""The chaos run's ProtocolChecker: quiet on a correct stream, and names each kind of violation it exists for."""

from __future__ import annotations

from laredo.replication.v1 import replication_pb2 as pb

from libs.client.tests.scripted_server import batch, entry, handshake, heartbeat, pos, row, snapshot
from tests.chaos.invariants import ProtocolChecker


def play(checker: ProtocolChecker, stream: str, resume: str, *messages: pb.SyncResponse | list[pb.SyncResponse],
         sequence: int = 0) -> None:
    checker.opened(stream, pb.SyncRequest(last_known_source_position=resume, last_known_sequence=sequence))
    for message in messages:
        for one in message if isinstance(message, list) else [message]:
            checker.received(stream, one.SerializeToString())
    checker.closed(stream)


def insert(sequence: int, n: int) -> pb.SyncResponse:
    return entry(sequence, pos(n), "INSERT", new=row(n))


def checker() -> ProtocolChecker:
    return ProtocolChecker("c", clock=lambda: 1.0)


def test_a_correct_snapshot_then_delta_resume_is_quiet() -> None:
    c = checker()
    play(c, "s#1", "", handshake("FULL_SNAPSHOT", current=3, resume=3),
         snapshot([row(1)], sequence=3, position=pos(3)), insert(4, 4), batch(insert(5, 5), insert(6, 6)),
         heartbeat(6))
    play(c, "s#2", pos(6), handshake("DELTA", current=9, resume=7), insert(8, 7), insert(9, 9))
    assert (c.count, c.violations, c.modes) == (0, [], {"FULL_SNAPSHOT": 1, "DELTA": 1})


def test_gaps_and_repeats_of_sequences() -> None:
    c = checker()
    play(c, "s#1", "", handshake("DELTA", current=9, resume=3), insert(4, 4), insert(6, 6), insert(6, 7))
    assert [v.what.split(":")[0] for v in c.violations] == ["a gap", "a repeat"]


def test_a_first_entry_not_after_the_resume_position() -> None:
    c = checker()
    play(c, "s#1", pos(10), handshake("DELTA", current=9, resume=3), insert(4, 10))
    assert c.count == 1 and "not after the resume position 0/0000100A" in c.violations[0].what


def test_positions_that_repeat_or_go_backwards_within_a_stream() -> None:
    c = checker()
    play(c, "s#1", "", handshake("FULL_SNAPSHOT", current=1, resume=1), snapshot([], sequence=1, position=pos(5)),
         insert(2, 6), insert(3, 6), insert(4, 4))
    assert [v.what.split("(")[1].split(",")[0] for v in c.violations] == ["a duplicate", "backwards"]


def test_the_replicas_applied_position_moving_back_across_streams() -> None:
    applied = [pos(9)]
    c = ProtocolChecker("c", clock=lambda: 1.0, applied_position=lambda: applied[0])
    play(c, "s#1", "", handshake("FULL_SNAPSHOT", current=1, resume=1))
    applied[0] = pos(5)
    play(c, "s#2", pos(5), handshake("DELTA", current=1, resume=1))
    assert c.count == 1 and "moved back from 0/00001009 to 0/00001005" in c.violations[0].what
