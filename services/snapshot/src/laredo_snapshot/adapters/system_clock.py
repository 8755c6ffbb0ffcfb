"""The Clock port on the system clock."""

from __future__ import annotations

import time


class SystemClock:
    def now(self) -> float:
        return time.time()
