"""Which WAL position may be confirmed to PostgreSQL: only what JetStream acknowledged, in publish order.

Every published message gets a sequence number in publish order. Acks may arrive in any order; the
confirmed LSN is the end_lsn of the newest transaction such that its final message and every message
published before it are acknowledged. Markers (empty transactions, idle keepalives) are positions with
no message: they become confirmable once everything before them is acknowledged. The confirmed LSN
never moves backwards and never passes a position whose messages are not all acknowledged.
"""

from __future__ import annotations


class AckTracker:
    def __init__(self, start_lsn: int) -> None:
        self._confirmed = start_lsn
        self._next_seq = 0
        self._head = 0  # lowest sequence number not yet retired
        self._end_lsns: dict[int, int] = {}  # seq -> end_lsn, for messages ending a transaction and markers
        self._acked: set[int] = set()

    @property
    def confirmed_lsn(self) -> int:
        return self._confirmed

    @property
    def pending(self) -> int:
        """Messages published and not yet acknowledged (or retired)."""
        return self._next_seq - self._head - len(self._acked)

    @property
    def drained(self) -> bool:
        return self._head == self._next_seq

    def register(self, end_lsn: int = 0) -> int:
        """A message about to be published; end_lsn > 0 when it is the final message of a transaction."""
        seq = self._next_seq
        self._next_seq += 1
        if end_lsn:
            self._end_lsns[seq] = end_lsn
        return seq

    def mark(self, lsn: int) -> bool:
        """A position with nothing to publish; returns True when the confirmed LSN advanced."""
        return self.ack(self.register(lsn))

    def ack(self, seq: int) -> bool:
        """JetStream stored message `seq`; returns True when the confirmed LSN advanced."""
        if seq < self._head or seq >= self._next_seq:
            return False
        self._acked.add(seq)
        before = self._confirmed
        acked, end_lsns = self._acked, self._end_lsns
        while self._head in acked:
            acked.discard(self._head)
            end_lsn = end_lsns.pop(self._head, 0)
            if end_lsn > self._confirmed:
                self._confirmed = end_lsn
            self._head += 1
        return self._confirmed != before
