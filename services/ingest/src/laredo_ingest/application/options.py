"""Everything the ingest use cases need to know about one source, as plain frozen values."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from laredo_kernel.changes import TableId
from laredo_core.stream.naming import source_subject_filter, stream_name

from laredo_ingest.domain.prerequisites import PublishedTableSpec
from laredo_ingest.domain.start_plan import SlotMode
from laredo_ingest.ports import StreamSpec


class KeylessPolicy(enum.Enum):
    """What to do with a configured table PostgreSQL cannot publish without rejecting the application's
    UPDATE and DELETE (no usable key, or a column list without the replica identity)."""

    REFUSE = "refuse"  # keep it out of the publication, report it (status, metrics, log), serve the others
    FAIL = "fail"  # refuse to start until it is fixed


@dataclass(frozen=True, slots=True)
class IngestOptions:
    source_id: str
    tables: tuple[TableId, ...]
    slot_mode: SlotMode
    slot_name: str
    publication_name: str
    publication_create: bool
    always_baseline: bool
    baseline_chunk_rows: int
    status_interval: float
    subject_prefix: str
    max_batch_changes: int
    max_batch_bytes: int
    stream_replicas: int = 1
    stream_max_age: float = 0.0
    stream_max_bytes: int = -1
    duplicate_window: float = 120.0
    reconnect_initial: float = 1.0
    reconnect_max: float = 30.0
    reconnect_multiplier: float = 2.0
    reconnect_max_attempts: int = 0
    #: How long a clean stop waits for outstanding acks before it confirms what it has.
    stop_timeout: float = 10.0
    #: How long the baseline waits for the acks of its last messages.
    baseline_ack_timeout: float = 60.0
    #: pgoutput proto_version; 2 allows streaming of in-progress transactions.
    protocol_version: int = 2
    #: Ask the server to stream large in-progress transactions (protocol 2); ingest spools them until commit.
    stream_in_progress: bool = True
    #: Bytes of one streamed transaction kept in memory before the rest goes to a temporary file.
    spool_memory: int = 64 * 1024 * 1024
    spool_dir: str = ""
    #: No frame (data or keepalive) for this long while waiting: the connection is presumed dead.
    receive_timeout: float = 60.0
    #: How often the slot's WAL status and the lag are read while streaming; 0 = never.
    slot_check_interval: float = 10.0
    keyless_tables: KeylessPolicy = KeylessPolicy.REFUSE
    #: Warn (status, metrics, log) when an inactive replication slot of the server retains more WAL; 0 = never.
    inactive_slot_wal_warning: int = 1024 * 1024 * 1024
    #: After a table's columns change, re-baseline it: ADD COLUMN ... DEFAULT and ALTER COLUMN TYPE change
    #: existing rows without any row change in the WAL.
    rebaseline_on_schema_change: bool = True
    #: Row filters and column lists of a managed publication, per table.
    published: tuple[PublishedTableSpec, ...] = field(default_factory=tuple)

    @property
    def reload_slot_name(self) -> str:
        """The temporary slot whose exported snapshot anchors an on-demand re-baseline."""
        return f"{self.slot_name[:59]}_rb"

    def stream_spec(self) -> StreamSpec:
        return StreamSpec(
            name=stream_name(self.subject_prefix, self.source_id),
            subjects=(source_subject_filter(self.subject_prefix, self.source_id),),
            duplicate_window=self.duplicate_window,
            max_age=self.stream_max_age,
            max_bytes=self.stream_max_bytes,
            replicas=self.stream_replicas,
        )
