"""Reconnect delays: exponential with full jitter, capped; reset after a run that made progress."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(slots=True)
class Backoff:
    initial: float
    maximum: float
    multiplier: float
    max_attempts: int = 0  # consecutive failures allowed; 0 = retry forever
    failures: int = 0

    def next_delay(self, rng: random.Random | None = None) -> float:
        """Record a failure and return how long to wait; the upper bound grows, the wait is jittered
        between half the bound and the bound so restarts of many instances spread out."""
        self.failures += 1
        bound = min(self.maximum, self.initial * self.multiplier ** (self.failures - 1))
        return (rng or random).uniform(bound / 2, bound)

    @property
    def exhausted(self) -> bool:
        return self.max_attempts > 0 and self.failures >= self.max_attempts

    def reset(self) -> None:
        self.failures = 0
