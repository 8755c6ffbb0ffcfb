"""The StreamBounds port on JetStream: laredo_core's NatsStreamBoundsReader, its answers as TailBounds.

The core reader tries to connect once per call; a compaction pass has no retry of its own, so a stream that
cannot be reached is asked again (`attempts` in all, `retry_wait` seconds apart) before the table's compaction
fails: a NATS restart during a pass does not cost the table its snapshot until the next interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from laredo_kernel.changes import TableId
from laredo_core.stream.bounds import StreamBoundsUnavailable
from laredo_core.stream.nats_bounds import NatsStreamBoundsReader

from laredo_snapshot.domain.errors import StreamUnavailable
from laredo_snapshot.domain.jobs import TailBounds

log = logging.getLogger(__name__)


class NatsStreamBounds:
    """Connects at the first call and keeps the connection (aclose() ends it)."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, client_name: str = "laredo-snapshot",
                 attempts: int = 3, retry_wait: float = 1.0) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self._reader = NatsStreamBoundsReader(urls, subject_prefix, client_name=client_name)
        self._attempts = attempts
        self._retry_wait = retry_wait

    async def bounds(self, source_id: str, table: TableId) -> TailBounds:
        for attempt in range(1, self._attempts + 1):
            try:
                read = await self._reader.bounds(source_id, table)
                return TailBounds(read.stream, read.first_sequence, read.last_sequence, read.subject_last_sequence)
            except StreamBoundsUnavailable as exc:
                if not exc.retryable:
                    raise StreamUnavailable(f"{exc}; {table} cannot be compacted yet") from None
                if attempt == self._attempts:
                    raise StreamUnavailable(str(exc)) from exc
                log.warning("%s: stream bounds not read (%s); attempt %d of %d in %.1f s", table, exc, attempt + 1,
                            self._attempts, self._retry_wait)
                await asyncio.sleep(self._retry_wait)  # a short backoff before asking NATS again
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def aclose(self) -> None:
        await self._reader.aclose()
