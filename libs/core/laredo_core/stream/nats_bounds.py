"""The StreamBoundsReader port on JetStream: stream info plus the last message of the table's subject."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from nats import errors as nats_errors
from nats.aio.client import Client as NatsClient
from nats.js.errors import NotFoundError

from laredo_kernel.changes import TableId
from laredo_core.stream import naming
from laredo_core.stream.bounds import StreamBoundsUnavailable, SubjectBounds
from laredo_core.stream.nats_connect import connect_nats
from laredo_core.stream.nats_servers import NatsServers

_FAILURES = (nats_errors.Error, OSError, asyncio.TimeoutError)


class NatsStreamBoundsReader:
    """The StreamBoundsReader port (laredo_core.stream.bounds); connects at the first call and keeps the connection
    until aclose()."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, client_name: str = "laredo-stream-bounds") -> None:
        self._urls = NatsServers.of(urls)
        self._prefix = subject_prefix
        self._client_name = client_name
        self._nc: NatsClient | None = None
        self._connecting = asyncio.Lock()

    async def bounds(self, source_id: str, table: TableId) -> SubjectBounds:
        stream = naming.stream_name(self._prefix, source_id)
        subject = naming.table_subject(self._prefix, source_id, table)
        js = (await self._connect()).jetstream()
        try:
            info = await js.stream_info(stream)
        except NotFoundError:
            raise StreamBoundsUnavailable(f"stream {stream} does not exist (has ingest started source "
                                          f"{source_id!r}?)", retryable=False) from None
        except _FAILURES as exc:
            raise StreamBoundsUnavailable(f"cannot read stream {stream} ({exc!r})", retryable=True) from exc
        last, first = info.state.last_seq, info.state.first_seq
        if not info.state.messages:
            first = last + 1  # an empty (or purged) stream: what it holds next comes after its last sequence
        try:
            message = await js.get_last_msg(stream, subject)
        except NotFoundError:
            return SubjectBounds(stream, first, last)
        except _FAILURES as exc:
            raise StreamBoundsUnavailable(f"cannot read the last message of {subject} in {stream} ({exc!r})",
                                          retryable=True) from exc
        return SubjectBounds(stream, first, last, message.seq or 0, message.data or b"")

    async def aclose(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(*_FAILURES):
                await nc.close()

    async def _connect(self) -> NatsClient:
        async with self._connecting:
            if self._nc is None or self._nc.is_closed:
                try:
                    # One attempt per call (the caller retries with backoff and logs); nats-py's error_cb would
                    # otherwise print a traceback per failed attempt.
                    self._nc = await connect_nats(self._urls, name=self._client_name, connect_timeout=2,
                                                  max_reconnect_attempts=1, reconnect_time_wait=0.2,
                                                  allow_reconnect=True, error_cb=_ignore)
                except _FAILURES as exc:
                    raise StreamBoundsUnavailable(f"cannot reach NATS at {', '.join(self._urls)} ({exc!r})",
                                                  retryable=True) from exc
            return self._nc


async def _ignore(_: Exception) -> None:
    return None
