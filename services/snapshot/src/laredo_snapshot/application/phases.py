"""Which phase of a compaction runs now, for the progress the status reports (laredo status, the console)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from laredo_snapshot.ports import Observer, PhaseSpan

#: A compaction's phases in the order they run (the Spark engine folds and writes in one, `snapshot.fold`).
PHASES = ("snapshot.read_tail", "snapshot.fold", "snapshot.write", "snapshot.checksum", "snapshot.manifest",
          "snapshot.retention")


class PhaseTracker:
    """An Observer that passes everything on to `inner` and remembers the last of PHASES that began."""

    def __init__(self, inner: Observer) -> None:
        self._inner = inner
        self.current = ""  # "" before the first phase of a compaction (reset() between compactions)

    @contextlib.contextmanager
    def phase(self, name: str, attributes: Mapping[str, Any]) -> Iterator[PhaseSpan]:
        if name in PHASES:
            self.current = name
        with self._inner.phase(name, attributes) as span:
            yield span

    def record(self, name: str, value: float, attributes: Mapping[str, str] | None = None) -> None:
        self._inner.record(name, value, attributes)

    def reset(self) -> None:
        self.current = ""

    def report(self) -> dict[str, Any]:
        """{"compacting_phase": "fold", "compacting_step": 2, "compacting_steps": 6} (nothing before the first)."""
        if not self.current:
            return {}
        return {"compacting_phase": self.current.removeprefix("snapshot."),
                "compacting_step": PHASES.index(self.current) + 1, "compacting_steps": len(PHASES)}
