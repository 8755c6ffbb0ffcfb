"""The DeadLetterStore port in memory: unit tests and embedded use. Same contract as the JetStream adapter.

Letters are stored as the same records the JetStream adapter stores, so what reads back is identical.
Faults: `available = False` makes every call raise DeadLetterStoreUnavailable; `delay` (seconds) is awaited
before each call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from laredo_core.deadletters.model import DeadLetter, DeadLetterPage, DeadLetterStoreUnavailable, PipelineId
from laredo_core.deadletters.records import decode_record, encode_record


class InMemoryDeadLetterStore:
    def __init__(self, *, available: bool = True, delay: float = 0.0) -> None:
        self.available = available
        self.delay = delay
        self.writes = 0  # write() calls that stored something (tests count them)
        self._sequence = 0
        self._letters: dict[PipelineId, dict[str, tuple[int, bytes]]] = {}

    async def write(self, letter: DeadLetter) -> None:
        await self._check()
        self._sequence += 1
        letters = self._letters.setdefault(letter.pipeline, {})
        letters.pop(letter.letter_id, None)  # a rewrite moves to the end
        letters[letter.letter_id] = (self._sequence, encode_record(letter))
        self.writes += 1

    async def list(self, pipeline: PipelineId, *, limit: int = 0, after_sequence: int = 0) -> DeadLetterPage:
        await self._check()
        stored = self._letters.get(pipeline, {})
        selected = [(seq, data) for seq, data in stored.values() if seq > after_sequence]
        if limit > 0:
            selected = selected[:limit]
        newest = max((seq for seq, _ in stored.values()), default=0)
        return DeadLetterPage(tuple(decode_record(data, store_sequence=seq) for seq, data in selected),
                              len(stored), newest)

    async def count(self, pipeline: PipelineId) -> int:
        await self._check()
        return len(self._letters.get(pipeline, {}))

    async def remove(self, pipeline: PipelineId, letter_ids: Iterable[str]) -> int:
        await self._check()
        stored = self._letters.get(pipeline, {})
        return sum(1 for letter_id in set(letter_ids) if stored.pop(letter_id, None) is not None)

    async def purge(self, pipeline: PipelineId) -> int:
        await self._check()
        return len(self._letters.pop(pipeline, {}))

    async def close(self) -> None:
        return None

    async def _check(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if not self.available:
            raise DeadLetterStoreUnavailable("the in-memory dead-letter store is switched off (available = False)")
