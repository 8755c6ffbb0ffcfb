"""Replay speeds: how fast a replay feeds the stream tail after its snapshot into the rebuilt table.

Snapshot rows carry no time, so they are always loaded as fast as possible. The tail's messages carry their
transaction's commit time: at `realtime` the replay waits between two messages as long as PostgreSQL took
between the two commits, at `<N>x` that gap divided by N (`10x` ten times faster, `0.5x` half as fast), and
at `full` not at all. Messages without a commit time (baseline messages) are never waited for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_FACTOR = re.compile(r"(?P<n>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)x")
#: The longest wait between two messages: a replay of a table idle for days still ends.
MAX_GAP_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class ReplaySpeed:
    """`factor` 0 = as fast as possible; otherwise commit-time gaps are divided by it."""

    text: str
    factor: float

    @classmethod
    def full(cls) -> ReplaySpeed:
        return cls("full", 0.0)

    @classmethod
    def parse(cls, text: str) -> ReplaySpeed:
        """'full' (also ''), 'realtime' (= '1x') or '<N>x' with N > 0; ValueError says what is accepted."""
        spoken = text.strip().lower()
        if spoken in ("", "full"):
            return cls.full()
        if spoken == "realtime":
            return cls("realtime", 1.0)
        match = _FACTOR.fullmatch(spoken)
        factor = float(match.group("n")) if match else 0.0
        if not match or not math.isfinite(factor) or factor <= 0:
            raise ValueError(f"speed {text!r} is not one of 'full', 'realtime' or '<N>x' with N > 0 "
                             "(e.g. '10x', '0.5x')")
        return cls(spoken, factor)

    @property
    def paced(self) -> bool:
        return self.factor > 0

    def gap(self, previous_commit_us: int, commit_us: int) -> float:
        """Seconds to wait before a message committed at `commit_us` after one committed at `previous_commit_us`."""
        if not self.paced or previous_commit_us <= 0 or commit_us <= previous_commit_us:
            return 0.0
        return min((commit_us - previous_commit_us) / 1_000_000 / self.factor, MAX_GAP_SECONDS)
