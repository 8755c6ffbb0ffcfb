"""Reconnect delays: exponential with jitter, reset once a stream reached live."""

from __future__ import annotations

import random

from laredo_client.options import BackoffPolicy


class Backoff:
    """The delay before each reconnect attempt. Not thread-safe: used by one client's event loop."""

    def __init__(self, policy: BackoffPolicy, rng: random.Random | None = None) -> None:
        self._policy = policy
        self._rng = rng or random.Random()
        self._attempt = 0

    @property
    def attempt(self) -> int:
        """Failed attempts since the last reset."""
        return self._attempt

    def next_delay(self) -> float:
        """The delay before the next attempt; each call counts one more failed attempt."""
        policy = self._policy
        ceiling = min(policy.maximum, policy.initial * policy.multiplier ** min(self._attempt, 64))
        self._attempt += 1
        return ceiling * (1 - policy.jitter * self._rng.random())

    def reset(self) -> None:
        """A stream reached live: the next failure starts again from the initial delay."""
        self._attempt = 0
