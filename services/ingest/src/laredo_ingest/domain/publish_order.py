"""Whether the stream stored one of ingest's messages ahead of an earlier one it lost: a pure check.

Ingest pipelines its messages, each naming the stream sequence its predecessor takes. A message that is lost or
refused is normally followed by refusals only. But when something else takes the sequence ingest predicted
(a message another client wrote to the source's subjects), the refused message's successor finds the sequence
it names and is stored. The stream then holds a later message before an earlier one, which a re-send cannot
fix: consumers would skip the earlier one as a position regression. This check reads what the stream holds
from the first sequence whose message failed, and finds that case so a new baseline can replace it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Overtaken:
    """The stream holds `later` (ingest's, at sequence `later_sequence`) after `sequence`, where ingest's
    `expected` belonged but `found` is (a message id, or "" for a message without one)."""

    sequence: int
    expected: str
    found: str
    later_sequence: int
    later: str

    def reason(self) -> str:
        found = f"message {self.found!r}" if self.found else "a message without a Nats-Msg-Id"
        return (f"the change stream holds {found} at sequence {self.sequence}, where ingest's {self.expected} "
                f"belonged, and ingest's later {self.later} at sequence {self.later_sequence}: a message ingest "
                "did not publish took the place of one of its own, so the stream holds a change ahead of an "
                "earlier one; a new baseline replaces what consumers hold (keep other clients from publishing to "
                "the source's subjects)")


def find_overtaken(predicted: Mapping[int, str], stored: Iterable[tuple[int, str]]) -> Overtaken | None:
    """predicted: stream sequence -> the message id ingest sent for it, for every message from the first one
    that failed; stored: (sequence, message id) of what the stream holds from that sequence on, in order.

    While each stored message is the one predicted for its sequence, all is in order (a message whose ack was
    lost may well be stored). After the first that is not, none of ingest's messages may follow."""
    ours = set(predicted.values())
    broken: tuple[int, str, str] | None = None
    for sequence, msg_id in stored:
        if broken is None:
            expected = predicted.get(sequence)
            if expected is not None and msg_id == expected:
                continue
            broken = (sequence, expected or "message", msg_id)
            if msg_id not in ours:
                continue
        if msg_id in ours:
            return Overtaken(broken[0], broken[1], broken[2], sequence, msg_id)
    return None
