"""Keeps one primary Sync stream running: reconnects with backoff and hands off to a new stream on GoAway.

- Every new stream asks the server to name its instance and journal epoch, and resumes by the applied source
  position; a reconnect (not a handoff, which moves elsewhere by design) also sends the cursor's sequence with
  the instance and epoch that issued it: the server resumes after it only if it issued it (exact even for
  entries that share or lack a source position), else by position. A server that does not name itself cannot
  tell, so its stream is refused unapplied (ServerChanged) and the client resumes by position only.
- A clean end of stream, silence past heartbeat_timeout, a sequence gap or a retryable status: reconnect after
  a backoff delay (reset once a stream caught up); a status retrying cannot fix stops the client (ClientFailed).
- GoAway: the old stream keeps applying while a new stream is dialled on the configured address with
  last_known_sequence = 0; once the new stream caught up the old one is closed and the new one becomes primary.
  If the old stream ends first, the new one carries on; if the new one fails, it is retried with backoff."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

import grpc
from google.protobuf import struct_pb2

from laredo.replication.v1 import replication_pb2 as pb

from laredo_client.backoff import Backoff
from laredo_client.client_replica import ClientReplica
from laredo_client.errors import ClientError, ClientFailed, ServerChanged
from laredo_client.options import ClientOptions, Filter, FilterKind
from laredo_client.stats import ClientStats
from laredo_client.sync_stream import SyncStream

log = logging.getLogger(__name__)

_FATAL_CODES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.ALREADY_EXISTS,
})
_CHECK_SUBSCRIPTION = "check the address, table and filters"
_REMEDIES = {
    grpc.StatusCode.UNAUTHENTICATED: ("the server requires a valid token: pass token=, or check that "
                                      "the token given is one this server accepts"),
    grpc.StatusCode.PERMISSION_DENIED: "the token's role may not read this table: use a token with the read role "
                                       "for it",
}


def filter_to_proto(predicate: Filter) -> pb.FieldPredicate:
    message = pb.FieldPredicate(field=predicate.field)
    if predicate.kind is FilterKind.PREFIX:
        message.prefix = predicate.value
    elif predicate.kind is FilterKind.EQUALS:
        message.equals.CopyFrom(_value(predicate.value))
    else:
        members = getattr(message, "in")  # `in` is a Python keyword
        members.SetInParent()
        members.values.extend(_value(v) for v in predicate.value)
    return message


def _value(scalar: object) -> struct_pb2.Value:
    holder = struct_pb2.ListValue()
    holder.append(scalar)
    return holder.values[0]


class ReplicationLoop:
    def __init__(self, options: ClientOptions, replica: ClientReplica, stats: ClientStats, backoff: Backoff,
                 on_caught_up: Callable[[], None]) -> None:
        self._options, self._replica, self._stats, self._backoff = options, replica, stats, backoff
        self._on_caught_up = on_caught_up
        self._numbers = itertools.count(1)
        self._delay = 0.0  # before the next connect attempt
        self._streams: set[SyncStream] = set()
        self._handoff_backoff = Backoff(options.backoff)
        self._last_handoff = float("-inf")
        self.primary: SyncStream | None = None
        self.status = "starting"
        self._last_failure = ""

    async def run(self) -> None:
        """Until cancelled; raises ClientFailed when the server refuses the subscription for good."""
        try:
            while True:
                if self.primary is None:
                    self.primary = await self._connect()
                primary = self.primary
                await _first_of(primary.task, primary.go_away.wait())
                if not _done(primary):
                    await self._pace_handoffs(primary)
                if _done(primary):
                    self._after_end(primary)
                    self.primary = None
                else:
                    self.primary = await self._hand_off(primary)
                    self._last_handoff = asyncio.get_running_loop().time()
        finally:
            await asyncio.gather(*(s.close() for s in list(self._streams)), return_exceptions=True)

    async def _connect(self) -> SyncStream:
        failure = f" after {self._last_failure}" if self._last_failure else ""
        if self._delay > 0:
            self.status = f"reconnecting to {self._options.address} in {self._delay:.2f}s{failure}"
            await asyncio.sleep(self._delay)
        if self._stats.streams_opened:
            self._stats.reconnects += 1
        self.status = f"connecting to {self._options.address}{failure}"
        return self._open(with_sequence=True, primary=True)

    def _open(self, *, with_sequence: bool, primary: bool) -> SyncStream:
        name = f"{self._options.schema}.{self._options.table}#{next(self._numbers)}"
        stream = SyncStream(self._options, self._replica, self._request(with_sequence), name=name,
                            stats=self._stats, on_caught_up=self._caught_up, primary=primary)
        self._streams.add(stream)
        stream.start().add_done_callback(lambda task: self._forget(stream, task))
        return stream

    def _forget(self, stream: SyncStream, task: asyncio.Task[None]) -> None:
        self._streams.discard(stream)
        if not task.cancelled():
            task.exception()  # examined by the loop when it matters; never "exception was never retrieved"

    def _request(self, with_sequence: bool) -> pb.SyncRequest:
        options, replica, cursor = self._options, self._replica, self._replica.cursor
        request = pb.SyncRequest(schema=options.schema, table=options.table, client_id=options.client_id,
                                 max_batch_size=options.max_batch_size, identify_instance=True,
                                 filters=[filter_to_proto(f) for f in options.filters])
        if replica.initialized:
            request.last_known_source_position = cursor.source_position
            request.last_snapshot_id = cursor.snapshot_id
            if with_sequence and cursor.resumable_sequence:
                request.last_known_sequence = cursor.sequence
                request.last_known_instance_id = cursor.server_id
                request.last_known_journal_epoch = cursor.journal_epoch
        return request

    def _caught_up(self, stream: SyncStream) -> None:
        self._backoff.reset()
        self._last_failure = ""
        self.status = f"live on {self._options.address}"
        self._on_caught_up()

    def _after_end(self, stream: SyncStream) -> None:
        """Log why a primary stream ended and set the delay before the next attempt (or fail for good)."""
        error = _outcome(stream)
        if isinstance(error, ServerChanged):
            log.info("%s; resuming by source position only", error)
            self._replica.cursor.forget_sequence()
            self._delay = 0.0
            return
        self._check_fatal(stream, error)
        self._delay = self._backoff.next_delay()
        self._last_failure = "a clean end of stream" if error is None else _describe(error)
        if error is None:
            log.info("%s: the server ended the stream; reconnecting in %.2fs", stream.name, self._delay)
        else:
            log.warning("%s: stream failed (%s); reconnecting in %.2fs", stream.name, _describe(error),
                        self._delay)

    def _check_fatal(self, stream: SyncStream, error: BaseException | None) -> None:
        if error is None or isinstance(error, ClientError):
            return
        if isinstance(error, grpc.aio.AioRpcError) and error.code() not in _FATAL_CODES:
            return
        self.status = f"failed: {_describe(error)}"
        if isinstance(error, grpc.aio.AioRpcError):
            raise ClientFailed(f"{stream.name}: the server refused the subscription ({_describe(error)}); "
                               f"{_REMEDIES.get(error.code(), _CHECK_SUBSCRIPTION)}") from error
        raise ClientFailed(f"{stream.name}: unexpected error while applying the stream: {error!r}") from error

    async def _pace_handoffs(self, old: SyncStream) -> None:
        """GoAway again soon after a handoff: the re-dial reached a draining server too (a single instance
        restarting, a load balancer that has not deregistered it yet). Wait with backoff, the old stream still
        applying, rather than hop between draining streams in a tight loop."""
        since = asyncio.get_running_loop().time() - self._last_handoff
        if since >= self._options.backoff.maximum:
            self._handoff_backoff.reset()
            return
        delay = self._handoff_backoff.next_delay()
        self.status = f"handing off again in {delay:.2f}s: the new server is draining too"
        log.info("%s: GoAway %.2fs after the last handoff; handing off again in %.2fs", old.name, since, delay)
        await _first_of(asyncio.sleep(delay), old.task)

    async def _hand_off(self, old: SyncStream) -> SyncStream | None:
        """Overlap a new stream with the draining one until the new one caught up; None if both are gone."""
        log.info("%s: handing off to a new stream on %s (resume after source position %s)", old.name,
                 self._options.address, self._replica.cursor.source_position or "(none)")
        self.status = f"handing off from a draining server ({old.go_away_reason})"
        while True:
            new = self._open(with_sequence=False, primary=False)
            await _first_of(new.caught_up.wait(), new.task, new.go_away.wait(), old.task)
            if new.caught_up.is_set():
                await old.close()
                return self._promote(new, old, "the new stream caught up; old stream closed")
            if not (_done(new) or new.go_away.is_set()):
                ended = _outcome(old)
                log.info("%s: draining stream ended (%s)", old.name, "cleanly" if ended is None else _describe(ended))
                return self._promote(new, old, "the old stream ended first; the new one carries on")
            self._check_fatal(new, _outcome(new))
            log.warning("%s: handoff attempt failed (%s)", new.name,
                        "server is draining too" if new.go_away.is_set() else _describe(_outcome(new)))
            await new.close()
            if not _done(old):
                await _first_of(asyncio.sleep(self._backoff.next_delay()), old.task)
            if _done(old):
                self._after_end(old)
                return None

    def _promote(self, new: SyncStream, old: SyncStream, how: str) -> SyncStream:
        new.promote()
        self._stats.handoffs += 1
        log.info("%s: handoff from %s complete: %s", new.name, old.name, how)
        return new


def _done(stream: SyncStream) -> bool:
    return stream.task is not None and stream.task.done()


def _outcome(stream: SyncStream) -> BaseException | None:
    task = stream.task
    if task is None or not task.done() or task.cancelled():
        return None
    return task.exception()


def _describe(error: BaseException | None) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details()}"
    return str(error) if error is not None else "no error"


async def _first_of(*waitables: object) -> None:
    """Wait until the first of these coroutines or tasks finishes; coroutines still pending are cancelled."""
    futures = [w if isinstance(w, asyncio.Future) else asyncio.ensure_future(w)  # type: ignore[arg-type]
               for w in waitables]
    owned = [f for f, w in zip(futures, waitables, strict=True) if f is not w]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in owned:
            future.cancel()
        await asyncio.gather(*owned, return_exceptions=True)
