"""The dead-letter store port: where changes a pipeline could not apply wait, with their reason.

Adapters: laredo_core.deadletters.nats_store (JetStream, production), laredo_core.deadletters.memory_store (tests,
embedded use); both run the contract test in libs/core/tests/deadletters/.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from laredo_core.deadletters.model import DeadLetter, DeadLetterPage, PipelineId


class DeadLetterStore(Protocol):
    """Dead letters by pipeline, each identified by its letter_id within the pipeline.

    Contract:
    - write(letter): durable once it returns. Idempotent by (pipeline, letter_id): a pipeline holds at most one
      letter per id, the last one written (several instances of a target that fail the same change write it
      once; a rewrite with a new reason replaces it). The store keeps only the failed change of the letter's
      message and fills in its description (action, position, xid, old and new values) when it decodes.
      A rewritten letter moves to the end of the store order.
    - list(pipeline, limit, after_sequence): the pipeline's letters in store order (the order they were last
      written: oldest first) with store_sequence > after_sequence, at most `limit` (0: all); `total` counts every
      letter of the pipeline, `newest_sequence` is the store sequence of its newest letter (0: none).
    - count(pipeline): how many letters the pipeline has.
    - remove(pipeline, letter_ids): removes those letters (unknown ids are ignored); returns how many it removed.
    - purge(pipeline): removes every letter of the pipeline; returns how many.
    - Pipelines are independent: nothing done to one changes another.
    - Errors: DeadLetterStoreUnavailable (retryable) when the store cannot be reached or does not answer in
      time; DeadLetterStoreError when it refuses (e.g. it cannot be created with the configured settings).
    - Calls may run concurrently; nothing connects before the first call; close() releases connections.
    """

    async def write(self, letter: DeadLetter) -> None: ...

    async def list(self, pipeline: PipelineId, *, limit: int = 0, after_sequence: int = 0) -> DeadLetterPage: ...

    async def count(self, pipeline: PipelineId) -> int: ...

    async def remove(self, pipeline: PipelineId, letter_ids: Iterable[str]) -> int: ...

    async def purge(self, pipeline: PipelineId) -> int: ...

    async def close(self) -> None: ...
