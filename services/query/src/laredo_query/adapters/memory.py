"""In-memory adapters for every port: unit tests and embedded use. Same contracts as the real ones."""

from __future__ import annotations

from laredo_core.stream.memory_feed import MemoryChangeFeed

__all__ = ["ManualClock", "MemoryChangeFeed"]  # the ChangeFeed fake is shared (typed values, as here)


class ManualClock:
    """A Clock that moves only when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time
