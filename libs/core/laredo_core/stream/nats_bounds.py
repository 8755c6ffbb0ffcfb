"""The StreamBoundsReader port on JetStream: stream info plus the last message of the table's subject."""

from __future__ import annotations

from collections.abc import Sequence

from nats.js.errors import NotFoundError

from laredo_kernel.changes import TableId
from laredo_core.stream import naming
from laredo_core.stream.bounds import StreamBoundsUnavailable, SubjectBounds
from laredo_core.stream.nats_connect import FAILURES, LazyNatsConnection


class NatsStreamBoundsReader:
    """The StreamBoundsReader port (laredo_core.stream.bounds); connects at the first call and keeps the connection
    until aclose()."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, client_name: str = "laredo-stream-bounds") -> None:
        self._prefix = subject_prefix
        # One attempt per call (the caller retries with backoff and logs); nats-py's error_cb would otherwise
        # print a traceback per failed attempt.
        self._nats = LazyNatsConnection(
            urls, lambda exc: StreamBoundsUnavailable(f"cannot reach NATS at {', '.join(urls)} ({exc!r})",
                                                      retryable=True),
            name=client_name, connect_timeout=2, max_reconnect_attempts=1, reconnect_time_wait=0.2,
            allow_reconnect=True, error_cb=_ignore)

    async def bounds(self, source_id: str, table: TableId) -> SubjectBounds:
        stream = naming.stream_name(self._prefix, source_id)
        subject = naming.table_subject(self._prefix, source_id, table)
        js = (await self._nats.get()).jetstream()
        try:
            info = await js.stream_info(stream)
        except NotFoundError:
            raise StreamBoundsUnavailable(f"stream {stream} does not exist (has ingest started source "
                                          f"{source_id!r}?)", retryable=False) from None
        except FAILURES as exc:
            raise StreamBoundsUnavailable(f"cannot read stream {stream} ({exc!r})", retryable=True) from exc
        last, first = info.state.last_seq, info.state.first_seq
        if not info.state.messages:
            first = last + 1  # an empty (or purged) stream: what it holds next comes after its last sequence
        try:
            message = await js.get_last_msg(stream, subject)
        except NotFoundError:
            return SubjectBounds(stream, first, last)
        except FAILURES as exc:
            raise StreamBoundsUnavailable(f"cannot read the last message of {subject} in {stream} ({exc!r})",
                                          retryable=True) from exc
        return SubjectBounds(stream, first, last, message.seq or 0, message.data or b"")

    async def aclose(self) -> None:
        await self._nats.aclose()


async def _ignore(_: Exception) -> None:
    return None
