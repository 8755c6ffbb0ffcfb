"""Inactive replication slots that hold back WAL: which ones exceed the warning threshold, and what to say."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetainedWal:
    """An inactive replication slot of the server (any slot, not only ingest's) and the WAL it keeps."""

    slot_name: str
    retained_bytes: int  # from the slot's restart_lsn to the server's current WAL position
    wal_status: str = ""


def slots_over_threshold(slots: Iterable[RetainedWal], threshold: int) -> dict[str, int]:
    """name -> retained bytes of the slots holding more than `threshold` bytes; none when it is 0 (off)."""
    if threshold <= 0:
        return {}
    return {s.slot_name: s.retained_bytes for s in slots if s.retained_bytes > threshold}


def retention_warning(slot_name: str, retained_bytes: int, threshold: int) -> str:
    return (f"replication slot {slot_name} is inactive and holds {retained_bytes} bytes of WAL (more than "
            f"inactive_slot_wal_warning = {threshold}): PostgreSQL keeps that WAL on disk until the slot's consumer "
            f"confirms it. Start its consumer, or drop it if it is no longer used: SELECT "
            f"pg_drop_replication_slot('{slot_name}') (for a Laredo ingest slot, its next start then takes a "
            "new baseline)")
