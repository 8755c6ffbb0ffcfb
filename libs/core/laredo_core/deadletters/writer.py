"""Writing dead letters in the background, so applying the stream never waits for the dead-letter store.

Pure asyncio over the DeadLetterStore port: services' application layers use it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass

from laredo_core.deadletters.model import DeadLetter, DeadLetterStoreError
from laredo_core.deadletters.store import DeadLetterStore

log = logging.getLogger(__name__)

DEFAULT_QUEUE_SIZE = 10_000


@dataclass(slots=True)
class WriterStats:
    written: int = 0  # letters the store acknowledged
    dropped: int = 0  # letters never stored: the queue was full, or the store refused them
    retries: int = 0  # write attempts that failed and were retried
    last_error: str = ""

    def report(self, pending: int) -> dict[str, object]:
        return {"written": self.written, "pending": pending, "dropped": self.dropped, "retries": self.retries,
                **({"last_error": self.last_error} if self.last_error else {})}


class DeadLetterWriter:
    """A bounded queue of letters and the loop that stores them, in order, one at a time.

    - submit() never blocks: it queues the letter and returns True, or returns False when `max_queue` letters
      already wait (the store has been away for long). Such a letter is not stored: it is logged (pipeline,
      letter id, position and reason) and counted in `stats.dropped`. Its change is still in the stream, so an
      instance that reads the stream again (a restart without a later snapshot) records it again.
    - run() (a service's long-lived task) stores queued letters; while the store is unreachable
      (DeadLetterStoreUnavailable) it retries the same letter with exponential backoff, logging once per
      outage; a letter the store refuses (DeadLetterStoreError) is logged and dropped.
    - idle() waits until nothing is queued or being written.
    """

    def __init__(self, store: DeadLetterStore, *, max_queue: int = DEFAULT_QUEUE_SIZE, initial_backoff: float = 0.1,
                 max_backoff: float = 5.0) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, got {max_queue}")
        self.store = store
        self.max_queue = max_queue
        self.stats = WriterStats()
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._queue: collections.deque[DeadLetter] = collections.deque()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def pending(self) -> int:
        return len(self._queue)

    def submit(self, letter: DeadLetter) -> bool:
        if len(self._queue) >= self.max_queue:
            self.stats.dropped += 1
            log.error("dead letter %s of %s NOT stored: %d letters already wait for the dead-letter store "
                      "(dead_letters.write_queue); its change at %s (stream sequence %d) stays in the stream: %s",
                      letter.letter_id, letter.pipeline, self.max_queue, letter.position or "unknown position",
                      letter.stream_sequence, letter.error)
            return False
        self._queue.append(letter)
        self._idle.clear()
        self._wakeup.set()
        return True

    async def idle(self) -> None:
        await self._idle.wait()

    async def run(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._write(self._queue[0])
            self._queue.popleft()

    async def _write(self, letter: DeadLetter) -> None:
        delay, outage = self._initial_backoff, False
        while True:
            try:
                await self.store.write(letter)
            except DeadLetterStoreError as exc:
                self.stats.last_error = str(exc)
                if not exc.retryable:
                    self.stats.dropped += 1
                    log.error("dead letter %s of %s NOT stored, the store refused it: %s (the change: %s)",
                              letter.letter_id, letter.pipeline, exc, letter.error)
                    return
                self.stats.retries += 1
                if not outage:
                    outage = True
                    log.warning("dead-letter store unavailable (%s); %d letter(s) wait, retrying with backoff while "
                                "the stream keeps flowing", exc, len(self._queue))
                await asyncio.sleep(delay)  # backoff between retries, not a hot path
                delay = min(delay * 2, self._max_backoff)
                continue
            self.stats.written += 1
            if outage:
                log.info("dead-letter store reachable again; %d letter(s) still to write", len(self._queue) - 1)
            return
