"""Everything the ingest use cases need to know about one source, as plain frozen values."""

from __future__ import annotations

from dataclasses import dataclass

from laredo_core.changes import TableId
from laredo_core.stream.naming import source_subject_filter, stream_name

from laredo_ingest.domain.start_plan import SlotMode
from laredo_ingest.ports import StreamSpec


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

    def stream_spec(self) -> StreamSpec:
        return StreamSpec(
            name=stream_name(self.subject_prefix, self.source_id),
            subjects=(source_subject_filter(self.subject_prefix, self.source_id),),
            duplicate_window=self.duplicate_window,
            max_age=self.stream_max_age,
            max_bytes=self.stream_max_bytes,
            replicas=self.stream_replicas,
        )
