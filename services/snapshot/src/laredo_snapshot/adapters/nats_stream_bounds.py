"""The StreamBounds port on JetStream: stream info plus the last message of the table's subject."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import nats
from nats import errors as nats_errors
from nats.aio.client import Client as NatsClient
from nats.js.errors import NotFoundError

from laredo_core.changes import TableId
from laredo_core.stream import naming

from laredo_snapshot.domain.errors import StreamUnavailable
from laredo_snapshot.domain.jobs import TailBounds

_FAILURES = (nats_errors.Error, OSError, asyncio.TimeoutError)


class NatsStreamBounds:
    """Connects at the first call and keeps the connection (aclose() ends it)."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, client_name: str = "laredo-snapshot") -> None:
        self._urls = list(urls)
        self._prefix = subject_prefix
        self._client_name = client_name
        self._nc: NatsClient | None = None
        self._connecting = asyncio.Lock()

    async def bounds(self, source_id: str, table: TableId) -> TailBounds:
        stream = naming.stream_name(self._prefix, source_id)
        subject = naming.table_subject(self._prefix, source_id, table)
        js = (await self._connect()).jetstream()
        try:
            info = await js.stream_info(stream)
        except NotFoundError:
            raise StreamUnavailable(f"stream {stream} does not exist (has ingest started source {source_id!r}?); "
                                    f"{table} cannot be compacted yet") from None
        except _FAILURES as exc:
            raise StreamUnavailable(f"cannot read stream {stream} ({exc!r})") from exc
        try:
            last = (await js.get_last_msg(stream, subject)).seq or 0
        except NotFoundError:
            last = 0
        except _FAILURES as exc:
            raise StreamUnavailable(f"cannot read the last message of {subject} in {stream} ({exc!r})") from exc
        return TailBounds(stream, info.state.first_seq, info.state.last_seq, last)

    async def aclose(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(*_FAILURES):
                await nc.close()

    async def _connect(self) -> NatsClient:
        async with self._connecting:
            if self._nc is None or self._nc.is_closed:
                try:
                    self._nc = await nats.connect(servers=self._urls, name=self._client_name, connect_timeout=2,
                                                  max_reconnect_attempts=3, allow_reconnect=True)
                except _FAILURES as exc:
                    raise StreamUnavailable(f"cannot reach NATS at {', '.join(self._urls)} ({exc!r})") from exc
            return self._nc
