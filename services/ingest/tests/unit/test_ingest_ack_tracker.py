"""Ack tracker: confirmation only advances over the contiguous acknowledged prefix, to transaction ends."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from laredo_ingest.domain.ack_tracker import AckTracker


def test_nothing_acked_confirms_the_start_position() -> None:
    tracker = AckTracker(0x100)
    tracker.register()
    tracker.register(end_lsn=0x200)
    assert tracker.confirmed_lsn == 0x100 and tracker.pending == 2


def test_out_of_order_acks_advance_only_over_the_contiguous_prefix() -> None:
    tracker = AckTracker(0x100)
    a1 = tracker.register()               # txn A, chunk 0
    a2 = tracker.register(end_lsn=0x200)  # txn A, final message
    b1 = tracker.register(end_lsn=0x300)  # txn B, single message
    c1 = tracker.register(end_lsn=0x400)  # txn C
    assert tracker.ack(b1) is False and tracker.confirmed_lsn == 0x100
    assert tracker.ack(a2) is False and tracker.confirmed_lsn == 0x100  # a1 still missing
    assert tracker.ack(a1) is True and tracker.confirmed_lsn == 0x300  # A and B complete at once
    assert not tracker.drained
    assert tracker.ack(c1) is True and tracker.confirmed_lsn == 0x400
    assert tracker.drained


def test_confirmation_stops_at_transaction_ends_not_at_mid_transaction_messages() -> None:
    tracker = AckTracker(0x100)
    a = [tracker.register(), tracker.register(), tracker.register(end_lsn=0x200)]
    tracker.ack(a[0])
    tracker.ack(a[1])
    assert tracker.confirmed_lsn == 0x100


def test_markers_wait_for_earlier_messages() -> None:
    tracker = AckTracker(0x100)
    seq = tracker.register(end_lsn=0x200)
    assert tracker.mark(0x280) is False and tracker.confirmed_lsn == 0x100
    assert tracker.ack(seq) is True and tracker.confirmed_lsn == 0x280
    assert tracker.mark(0x300) is True and tracker.confirmed_lsn == 0x300


def test_confirmed_never_moves_backwards_and_repeated_or_unknown_acks_are_ignored() -> None:
    tracker = AckTracker(0x500)
    seq = tracker.register(end_lsn=0x400)  # an old transaction re-sent after a restart
    assert tracker.ack(seq) is False and tracker.confirmed_lsn == 0x500
    assert tracker.ack(seq) is False and tracker.ack(99) is False


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_any_ack_order_confirms_exactly_the_complete_prefix(sizes: list[int], rnd) -> None:
    tracker = AckTracker(1)
    messages = []  # (seq, transaction index)
    ends = []
    for txn, size in enumerate(sizes):
        end = 100 * (txn + 1)
        ends.append(end)
        messages += [(tracker.register(end_lsn=end if i == size - 1 else 0), txn) for i in range(size)]
    order = list(messages)
    rnd.shuffle(order)
    acked: set[int] = set()
    for seq, _ in order:
        tracker.ack(seq)
        acked.add(seq)
        complete = [txn for txn in range(len(sizes)) if all(s in acked for s, t in messages if t <= txn)]
        expected = ends[max(complete)] if complete else 1
        assert tracker.confirmed_lsn == expected
    assert tracker.drained
