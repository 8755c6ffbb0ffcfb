"""Per-client send buffers: how many entries may wait for one client, and what happens when they cannot."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class BufferPolicy(enum.Enum):
    """What a live client's full send buffer means.

    DROP_DISCONNECT: the client is ended (RESOURCE_EXHAUSTED) at once; it reconnects and resumes by
    sequence or position, so one stuck client costs nothing but its own reconnect.
    SLOW_DOWN: the client is fed at the pace it reads (state "backpressured"); its entries wait in the
    shared journal, and if pruning overtakes them it is ended (ABORTED) and re-syncs.
    Neither ever makes the apply path or another client wait.
    """

    DROP_DISCONNECT = "drop_disconnect"
    SLOW_DOWN = "slow_down"


@dataclass(frozen=True, slots=True)
class BufferLimits:
    """`max_size`: journal entries (or snapshot rows) queued for one client, not yet written to it."""

    max_size: int = 50_000
    policy: BufferPolicy = BufferPolicy.DROP_DISCONNECT

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError(f"client buffer max_size must be at least 1, got {self.max_size}")
