"""The StreamBoundsReader port: where a source's change stream stands, and the newest message of one table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from laredo_kernel.changes import TableId
from laredo_kernel.errors import LaredoError


class StreamBoundsUnavailable(LaredoError):
    """Where the stream stands cannot be read: retryable when the server cannot be reached, not retryable when the
    stream does not exist (has ingest started the source?)."""


@dataclass(frozen=True, slots=True)
class SubjectBounds:
    """One table's subject in its source's stream, as it was when read.

    first_sequence: the oldest message the stream still holds (any subject), last_sequence + 1 when it holds
    none; last_sequence: its newest message (0: none yet); subject_last_sequence: the newest message of the
    table's subject (0: none); subject_last_message: that message's bytes as published (b"" when none).
    """

    stream: str
    first_sequence: int
    last_sequence: int
    subject_last_sequence: int = 0
    subject_last_message: bytes = b""


class StreamBoundsReader(Protocol):
    """Reads where the change stream stands for one table (JetStream in production).

    Contract:
    - bounds(source_id, table): the stream's first and last sequence and the newest message of the table's
      subject (see SubjectBounds), read together; no side effects; concurrent calls are allowed;
    - it raises StreamBoundsUnavailable: retryable when the server cannot be reached (one attempt per call:
      the caller retries with backoff and logs), not retryable when the stream does not exist;
    - aclose() releases the connection; a later call connects again.
    """

    async def bounds(self, source_id: str, table: TableId) -> SubjectBounds: ...

    async def aclose(self) -> None: ...
