"""Log a coordination outage once when it starts and once when it ends, never once per retry."""

from __future__ import annotations

import logging
import time


class OutageLog:
    """Remembers whether the last attempt of `what` failed, so a run of failures logs one warning.

    Invariant: between two successes, at most one warning is logged; the first success after a failure logs
    one info line with the outage's duration.
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._logger = logger
        self._what = what
        self._down_since: float | None = None

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, error: BaseException) -> None:
        if self._down_since is not None:
            return
        self._down_since = time.monotonic()
        self._logger.warning("%s: coordination store unavailable, retrying quietly until it is back: %s",
                             self._what, error)

    def succeeded(self) -> None:
        if self._down_since is None:
            return
        seconds = time.monotonic() - self._down_since
        self._down_since = None
        self._logger.info("%s: coordination store reachable again after %.1fs", self._what, seconds)
