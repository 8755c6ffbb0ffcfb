"""Changes that cannot go to their table's subject, as dead letters of each of the table's pipelines (JetStream
records): changes of a table that has no usable key (it lost it while published: start-up refuses such tables),
and changes too large for any NATS message (OutboundBatch.dead_letter_reason, holding their key only).

ListDeadLetters shows them with the reason and the fix. Letter ids come from the change's position, so a replay
of the same WAL after a restart writes the same letters again (replacing them), never new ones.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping

from laredo_kernel.changes import TableId
from laredo_core.deadletters.model import DeadLetter, PipelineId, position_letter_id
from laredo_core.deadletters.nats_store import letter_msg_id, letter_subject
from laredo_core.deadletters.records import encode_record
from laredo_kernel.position import Position

from laredo_ingest.adapters.batch_encoding import encode_batch
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.schema import key_problem

#: One dead-letter message: subject, Nats-Msg-Id, payload.
LetterMessage = tuple[str, str, bytes]


class KeylessDeadLetters:
    """`targets`: the target types of each table of the source (its pipelines)."""

    def __init__(self, subject_prefix: str, source_id: str, targets: Mapping[TableId, tuple[str, ...]], *,
                 clock: Callable[[], float] = time.time) -> None:
        self._prefix = subject_prefix
        self._source_id = source_id
        self._targets = targets
        self._clock = clock

    def messages(self, batch: OutboundBatch) -> list[LetterMessage]:
        """One message per change and pipeline; none for a message without changes (baseline begin/end, ...)."""
        table = batch.schema.table
        target_types = self._targets.get(table, ())
        if not batch.changes or not target_types:
            return []
        reason = batch.dead_letter_reason or (
            f"{key_problem(batch.schema)}. Ingest keeps its changes here instead of publishing them; once the table "
            "has a key, restart ingest (or reload the table: ReloadTable) and purge these, or replay them")
        recorded = int(self._clock() * 1000)
        messages: list[LetterMessage] = []
        for change in batch.changes:
            data = encode_batch(dataclasses.replace(batch, changes=[change], end_lsn=0))
            letter_id = position_letter_id(str(Position(batch.commit_lsn, change.ordinal)))
            for target_type in target_types:
                pipeline = PipelineId(self._source_id, table, target_type)
                letter = DeadLetter(pipeline, letter_id, reason, data, 0, 0, recorded, f"ingest:{self._source_id}")
                messages.append((letter_subject(self._prefix, pipeline, letter_id), letter_msg_id(letter),
                                 encode_record(letter)))
        return messages
