"""In-memory adapters of the snapshot service: stream bounds over MemoryChangeFeed, a manual clock, observers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.stream.memory_feed import MemoryChangeFeed

from laredo_snapshot.domain.errors import StreamUnavailable
from laredo_snapshot.domain.jobs import TailBounds


class MemoryStreamBounds:
    """StreamBounds over a MemoryChangeFeed. Faults: `unavailable = True` raises StreamUnavailable."""

    def __init__(self, feed: MemoryChangeFeed, stream: str = "memory") -> None:
        self._feed = feed
        self._stream = stream
        self.unavailable = False

    async def bounds(self, source_id: str, table: TableId) -> TailBounds:
        if self.unavailable:
            raise StreamUnavailable(f"stream {self._stream} set unavailable (injected fault)")
        stored = self._feed.stored(table)
        return TailBounds(self._stream, self._feed.first_sequence, self._feed.last_sequence,
                          stored[-1][0] if stored else 0)


class ManualClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.value = now

    def now(self) -> float:
        return self.value

    def advance(self, seconds: float) -> None:
        self.value += seconds


class _Span(dict[str, Any]):
    """A phase's attributes, set() as on a span."""

    set = dict.__setitem__


@dataclass
class RecordingObserver:
    """Keeps every phase (name, attributes, nesting depth) and measurement, for tests."""

    phases: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)
    measurements: list[tuple[str, float, dict[str, str]]] = field(default_factory=list)
    _depth: int = 0

    @contextlib.contextmanager
    def phase(self, name: str, attributes: Mapping[str, Any]) -> Iterator[_Span]:
        span = _Span(attributes)
        self.phases.append((name, span, self._depth))
        self._depth += 1
        try:
            yield span
        finally:
            self._depth -= 1

    def record(self, name: str, value: float, attributes: Mapping[str, str] | None = None) -> None:
        self.measurements.append((name, value, dict(attributes or {})))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.phases]
