"""What ingest publishes: one OutboundBatch per stream message, holding changes of one table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from laredo_kernel.changes import Action, BatchKind, ColumnInfo

from laredo_ingest.domain.schema import TableSchema

#: Per-change allowance for ordinal, action and framing when sizing a batch against max_batch_bytes.
CHANGE_OVERHEAD_BYTES = 16


class ChangeRecord(NamedTuple):
    """One row change, tuples in pgoutput TupleData form (empty bytes = absent)."""

    action: Action
    ordinal: int
    old_tuple: bytes = b""
    new_tuple: bytes = b""
    old_is_key_only: bool = False

    @property
    def size(self) -> int:
        """Approximate encoded size, for batch byte limits."""
        return len(self.old_tuple) + len(self.new_tuple) + CHANGE_OVERHEAD_BYTES


@dataclass(slots=True)
class OutboundBatch:
    """One stream message before encoding; `msg_id` is its JetStream dedup key, stable across replays.
    Treated as immutable once built (not frozen only because a frozen dataclass is slow to construct, and
    one is built per published message)."""

    subject: str
    msg_id: str
    source_id: str
    kind: BatchKind
    schema: TableSchema
    commit_lsn: int
    end_lsn: int = 0  # set on the final message of a transaction only
    xid: int = 0
    commit_time_unix_us: int = 0
    chunk: int = 0
    last_chunk: bool = False
    changes: list[ChangeRecord] = field(default_factory=list)
    baseline_id: str = ""
    baseline_row_count: int = 0
    old_columns: tuple[ColumnInfo, ...] = ()  # SCHEMA_CHANGE: the columns before
    reason: str = ""  # SCHEMA_CHANGE, RESYNC_REQUIRED: why, for humans
    #: Non-empty: the changes could not be published on the table's subject (see message_limits.py); the
    #: batch goes to the table's dead-letter subject, or (dead letters on) becomes dead letters with this reason.
    dead_letter_reason: str = ""

    @property
    def dead_letter(self) -> bool:
        """Not for the table's subject: kept as dead letters (no usable key, or a change too large to publish)."""
        return bool(self.dead_letter_reason) or not self.schema.has_usable_key
