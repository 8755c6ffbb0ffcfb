"""In-memory fakes of OAM's ports: the coordination store fake shared with the other services."""

from __future__ import annotations

from laredo_core.coordination.memory import InMemoryCoordinationStore, ManualClock

__all__ = ["InMemoryCoordinationStore", "ManualClock"]
