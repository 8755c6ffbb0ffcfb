"""Per-client send buffers: how many entries may wait for one client, and what happens when they cannot."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class BufferPolicy(enum.Enum):
    """What a full send buffer means, in every phase of a stream (snapshot, catch-up, live).

    DROP_DISCONNECT: the client is ended (RESOURCE_EXHAUSTED) at once; it reconnects and resumes by sequence or
    position (or, stopped during its snapshot, syncs again), so one stuck client costs nothing but its own reconnect.
    SLOW_DOWN: the client is fed at the pace it reads (state "backpressured"); its entries wait in the shared journal,
    which stops holding them for it (its pin is released), and if pruning overtakes them it is ended (ABORTED) and
    re-syncs.
    Neither ever makes the apply path or another client wait, nor lets one client grow the journal beyond its limits
    by more than `max_size` entries.
    """

    DROP_DISCONNECT = "drop_disconnect"
    SLOW_DOWN = "slow_down"


@dataclass(frozen=True, slots=True)
class BufferLimits:
    """How far one client may fall behind. max_size: journal entries appended that the client has not been
    offered yet, plus those offered and not yet written to it (entries its filter skips count as offered at once).
    catch_up_timeout: seconds the journal is held (pinned) for one client's snapshot and catch-up; after them its
    entries may be pruned like anyone's (0: no time limit, only max_size)."""

    max_size: int = 50_000
    policy: BufferPolicy = BufferPolicy.DROP_DISCONNECT
    catch_up_timeout: float = 300.0

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError(f"client buffer max_size must be at least 1, got {self.max_size}")
        if self.catch_up_timeout < 0:
            raise ValueError(f"client buffer catch_up_timeout must not be negative, got {self.catch_up_timeout}")


def client_lag(current_sequence: int, offered_through: int, queued_entries: int, joined_at: int = 0) -> int:
    """Entries a client is behind: those not offered to it yet, plus those queued for it and not yet written.
    Entries a filter skipped count as offered (they will never be written), so a filtered client is not thought
    behind for changes it does not want. `joined_at`: the journal's sequence when the client connected; the
    backlog before it was retained anyway and does not count (a delta client catching up on more than max_size
    entries is not too slow for that)."""
    progress = max(offered_through - queued_entries, joined_at)
    return max(0, current_sequence - progress)


class Phase(enum.Enum):
    """Where a stream is: every phase is bounded by the same limits."""

    SNAPSHOT = "snapshot"
    CATCH_UP = "catch-up"
    LIVE = "live"


class LagAction(enum.Enum):
    WITHIN = "within"  # nothing to do
    SLOW_DOWN = "slow_down"  # backpressured: fed at its pace, the journal no longer held for it
    DISCONNECT = "disconnect"  # ended with RESOURCE_EXHAUSTED


def lag_action(limits: BufferLimits, lag: int) -> LagAction:
    """What a client `lag` entries behind gets under `limits`, whatever its phase."""
    if lag <= limits.max_size:
        return LagAction.WITHIN
    return LagAction.DISCONNECT if limits.policy is BufferPolicy.DROP_DISCONNECT else LagAction.SLOW_DOWN


def pin_expired(limits: BufferLimits, pinned_for: float) -> bool:
    """Whether the journal has been held long enough for one client's snapshot and catch-up."""
    return limits.catch_up_timeout > 0 and pinned_for >= limits.catch_up_timeout
