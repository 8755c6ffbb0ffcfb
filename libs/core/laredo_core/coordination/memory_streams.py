"""Command streams with consumer groups kept in memory, with the Redis semantics the fake must match."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


class GroupLost(Exception):
    """The consumer group or its stream vanished (the store was cleared, like a Redis restart)."""


@dataclass(slots=True)
class _Pending:
    consumer: str
    delivered_at: float


@dataclass(slots=True)
class _Group:
    last_delivered: int
    pending: dict[int, _Pending] = field(default_factory=dict)


@dataclass(slots=True)
class _Stream:
    entries: dict[int, str] = field(default_factory=dict)  # sequence -> command JSON, in append order
    last_seq: int = 0
    groups: dict[str, _Group] = field(default_factory=dict)


class MemoryStreams:
    """One stream per target; per group a read position and a pending list (consumer, delivery time).

    Mirrors XADD MAXLEN, XGROUP CREATE MKSTREAM (at 0 or $), XREADGROUP 0 / >, XAUTOCLAIM and XACK.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._streams: dict[str, _Stream] = {}

    def clear(self) -> None:
        self._streams.clear()

    def append(self, target: str, text: str, maxlen: int) -> None:
        stream = self._streams.setdefault(target, _Stream())
        stream.last_seq += 1
        stream.entries[stream.last_seq] = text
        while len(stream.entries) > maxlen:
            oldest = next(iter(stream.entries))
            del stream.entries[oldest]
            for group in stream.groups.values():
                group.pending.pop(oldest, None)

    def ensure_group(self, target: str, group: str, *, from_end: bool) -> None:
        stream = self._streams.setdefault(target, _Stream())
        if group not in stream.groups:
            stream.groups[group] = _Group(stream.last_seq if from_end else 0)

    def own_pending(self, target: str, group: str, consumer: str) -> list[tuple[int, str]]:
        """Entries delivered earlier to `consumer` and never acknowledged; their idle time restarts."""
        stream, grp = self._stream_group(target, group)
        now = self._clock()
        mine = [seq for seq, pending in grp.pending.items() if pending.consumer == consumer]
        for seq in mine:
            grp.pending[seq].delivered_at = now
        return [(seq, stream.entries[seq]) for seq in mine]

    def next_entry(self, target: str, group: str, consumer: str, claim_idle: float) -> tuple[int, str] | None:
        """Claim an entry pending for `claim_idle` seconds, else deliver the next new one, else None."""
        stream, grp = self._stream_group(target, group)
        now = self._clock()
        for seq, pending in grp.pending.items():
            if now - pending.delivered_at >= claim_idle:
                grp.pending[seq] = _Pending(consumer, now)
                return seq, stream.entries[seq]
        for seq, text in stream.entries.items():
            if seq > grp.last_delivered:
                grp.last_delivered = seq
                grp.pending[seq] = _Pending(consumer, now)
                return seq, text
        return None

    def ack(self, target: str, group: str, seq: int) -> None:
        stream = self._streams.get(target)
        grp = stream.groups.get(group) if stream is not None else None
        if grp is not None:
            grp.pending.pop(seq, None)

    def _stream_group(self, target: str, group: str) -> tuple[_Stream, _Group]:
        stream = self._streams.get(target)
        grp = stream.groups.get(group) if stream is not None else None
        if stream is None or grp is None:
            raise GroupLost(f"consumer group {group!r} of {target!r} is gone")
        return stream, grp
