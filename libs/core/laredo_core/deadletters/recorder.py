"""A consumer's failures as dead letters of its pipelines, counted and logged (pure: services' application layers).

The consumer keeps going with the next change whatever happens here: letters go to a DeadLetterWriter (bounded,
in the background). Without a writer (dead_letters.enabled = false) failures are only logged and counted.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable

from laredo_kernel.changes import TableId
from laredo_core.deadletters.model import (
    WHOLE_MESSAGE,
    DeadLetter,
    PipelineId,
    change_letter_id,
    message_letter_id,
)
from laredo_core.deadletters.writer import DeadLetterWriter
from laredo_core.stream.feed import FeedMessage, UndecodableMessage

log = logging.getLogger(__name__)

#: Per table, the first failures are logged one by one, later ones once every LOG_EVERY.
LOG_FIRST = 20
LOG_EVERY = 1000


class DeadLetterRecorder:
    """Records what a consumer of `target_type` could not apply; `recorded_by` names it (`fanout:<instance>`)."""

    def __init__(self, writer: DeadLetterWriter | None, target_type: str, recorded_by: str, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.writer = writer
        self.target_type = target_type
        self.recorded_by = recorded_by
        self.counts: collections.Counter[TableId] = collections.Counter()
        self._clock = clock

    def change_failed(self, source_id: str, message: FeedMessage, index: int, error: str) -> None:
        """Change `index` of the message (of the consumer's table of source `source_id`) could not be applied."""
        change = message.batch.changes[index]
        self._record(source_id, message.table, change_letter_id(message.stream_sequence, index),
                     error, message.data, index, message.stream_sequence,
                     f"{change.action.value} at {change.position}")

    def message_failed(self, source_id: str, message: FeedMessage, error: str) -> None:
        """The message as a whole could not be applied (e.g. it carries another table)."""
        self._record(source_id, message.table, message_letter_id(message.stream_sequence),
                     error, message.data, WHOLE_MESSAGE, message.stream_sequence,
                     f"{message.batch.kind.value} message")

    def undecodable(self, message: UndecodableMessage) -> None:
        self._record(message.source_id, message.table, message_letter_id(message.stream_sequence), message.error,
                     message.data, WHOLE_MESSAGE, message.stream_sequence, "message that does not decode")

    def _record(self, source_id: str, table: TableId, letter_id: str, error: str, data: bytes, index: int,
                stream_sequence: int, what: str) -> None:
        self.counts[table] += 1
        count = self.counts[table]
        pipeline = PipelineId(source_id, table, self.target_type)
        stored = False
        if self.writer is not None:
            stored = self.writer.submit(DeadLetter(pipeline, letter_id, error, data, index, stream_sequence,
                                                   int(self._clock() * 1000), self.recorded_by))
        if count <= LOG_FIRST or count % LOG_EVERY == 0:
            log.error("%s: skipped the %s (stream sequence %d), %s: %s%s", table, what, stream_sequence,
                      self._where(pipeline, letter_id, stored), error,
                      f" [{count} so far for this table; from now on every {LOG_EVERY}th is logged]"
                      if count == LOG_FIRST else "")

    def _where(self, pipeline: PipelineId, letter_id: str, stored: bool) -> str:
        if stored:
            return f"kept as dead letter {letter_id} (ListDeadLetters {pipeline})"
        if self.writer is None:
            return "NOT kept: dead letters are off (dead_letters.enabled = false)"
        return "NOT kept: the dead-letter queue is full (dead_letters.write_queue)"
