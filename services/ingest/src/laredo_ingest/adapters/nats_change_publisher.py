"""ChangePublisher on NATS JetStream: pipelined publishes with per-message acks on one reply subscription.

Each message is a core publish with a reply subject `<inbox>.<token>`; JetStream answers there with a
PubAck (or an error). Up to `max_pending` messages are unacknowledged at once (a semaphore is the window),
so publishing never waits for a single round trip. This is nats-py's publish_async pattern without its
per-message future, plus an ack deadline: nats-py's futures never time out, and an ack that never
comes must fail the message so the stream restarts instead of stalling.

Order: the stream never holds a message before one published earlier is stored. A session starts carefully:
each change-stream message waits for its ack before the next is sent, while the slot re-sends what the stream
already holds (acknowledged as duplicates by Nats-Msg-Id). The first message stored anew tells the stream's
last sequence; from there messages are pipelined, each naming the sequence its predecessor takes
(Nats-Expected-Last-Sequence). JetStream refuses a message whose predecessor was lost on the wire or refused (a
503 during a leader election, a dropped connection whose later frames nats-py re-sends after reconnecting), so
nothing after a hole is stored; the refusal fails the session and the next one starts again from the slot's
confirmed position. Once a message of a session fails, later ones of it are not even sent. Expected sequences
rather than expected message ids: a cluster checks the sequence before it replicates a message, but a message
id only while applying it on every replica, where a mismatch stops the stream (nats-server logs "critical
write error"); and a single server checks the sequence before duplicates, which is why duplicates are sent
carefully, one at a time, with no expectation.

A hole the chaining cannot see: a message another client writes to the source's subjects takes the sequence
predicted for ingest's next message, which is refused, while its already sent successor names that sequence
and is stored. So the next session first reads what the stream holds from the first sequence whose message
failed; if one of ingest's messages follows one it did not predict (domain.publish_order), the stream tail it
returns says so (StreamTail.disorder), and ingest takes a new baseline instead of re-sending the lost message
behind its successor. A pipelined message acknowledged as a duplicate of one stored before the session's first
new message is the same disorder, found one session late (after a restart that lost the first finding).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import Mapping

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from laredo_kernel.position import format_lsn
from laredo_core.stream.naming import (
    HEADER_COMMIT_LSN,
    HEADER_END_LSN,
    HEADER_EXPECTED_LAST_SEQUENCE,
    HEADER_KIND,
    HEADER_MSG_ID,
    HEADER_TABLE,
    epoch_msg_id,
)
from laredo_core.runtime import cancel

from laredo_ingest.adapters.batch_encoding import encode_batch
from laredo_ingest.adapters.keyless_dead_letters import KeylessDeadLetters
from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.adapters.nats_fast_publish import FastPublisher, intercept_replies, sanitize
from laredo_ingest.adapters.nats_publish_replies import AllAcked, ack_error, pub_ack
from laredo_ingest.adapters.nats_stream_setup import (
    TAIL_SEARCH,
    UNANSWERED,
    ensure_change_stream,
    ensure_dead_letter_stream,
    read_msg_ids,
    read_tail,
)
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.errors import IngestError, PublishFailed, StreamSetupFailed
from laredo_ingest.domain.publish_order import find_overtaken
from laredo_ingest.domain.start_plan import StreamTail
from laredo_ingest.ports import AckCallback, StreamSpec

log = logging.getLogger(__name__)

_Pending = tuple[AckCallback, float, str, int]  # on_ack, ack deadline (loop time), msg id, slot
#: `slot` of a pending message: the stream sequence predicted for a chained change message; else one of these.
_CAREFUL, _DEAD_LETTER = 0, -1


class NatsChangePublisher:
    """`dead_letters`: batches of tables without a usable key become dead letters (stored in the stream
    `dead_letter_stream`, created when missing) instead of messages on the old dead-letter subject."""

    def __init__(self, connection: NatsConnection, *, max_pending: int, ack_timeout: float = 10.0,
                 dead_letters: KeylessDeadLetters | None = None,
                 dead_letter_stream: StreamConfig | None = None) -> None:
        self._connection = connection
        self._dead_letters = dead_letters
        self._dead_letter_stream = dead_letter_stream
        self._ack_timeout = ack_timeout
        self._max_pending = max_pending
        self._window = asyncio.Semaphore(max_pending)
        self._pending: dict[str, _Pending] = {}
        self._tokens = itertools.count()
        self._idle = asyncio.Event()
        self._idle.set()
        self._inbox = ""
        self._inbox_prefix = 0
        self._subscription: Subscription | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._sender: FastPublisher | None = None
        self._trace_source: Mapping[str, str] | None = None
        self._trace_lines = ""
        self._stored_last: int | None = None  # the sequence the previous message takes; None: careful start
        self._predicted: dict[int, str] = {}  # slot -> msg id, from the oldest unacknowledged chained message
        self._first_failed: int | None = None  # the lowest slot whose message failed in this session
        self._failed: IngestError | None = None  # a change message of this session failed: send no more
        self._disorder = ""  # found by a duplicate ack: the stream holds a later change ahead of an earlier one
        self._first_new: int | None = None  # the sequence of the session's first message stored anew
        self._probes: dict[str, asyncio.Future[tuple[int, bool] | None]] = {}  # token -> (seq, duplicate)
        self._epoch = 0
        self.acks = 0  # messages JetStream acknowledged as stored
        self.ack_seconds = 0.0  # their time from send to acknowledgement, summed (the mean: ack_seconds / acks)

    async def ensure_stream(self, spec: StreamSpec) -> StreamTail | None:
        js = await self._connection.jetstream()
        await ensure_change_stream(js, spec)
        try:
            if self._dead_letters is not None and self._dead_letter_stream is not None:
                await ensure_dead_letter_stream(js, self._dead_letter_stream)
            await self._listen_for_acks()
        except UNANSWERED as exc:  # e.g. a cluster electing the leader of a stream
            raise StreamSetupFailed(f"JetStream did not answer while setting up publishing ({exc!r}); retrying",
                                    retryable=True) from exc
        # The next message must follow the stream's last one: whatever an earlier session left in flight has
        # failed (a late arrival of it makes the first new message fail, and the session start again).
        self._fail_all("a new publishing session started")
        disorder = self._disorder or await self._check_order(js, spec)
        tail = await read_tail(js, spec.name)
        self._stored_last = self._first_failed = self._failed = self._first_new = None
        self._disorder = ""
        self._predicted.clear()
        if not disorder:
            return tail
        log.error("JetStream stream %s: %s", spec.name, disorder)
        return dataclasses.replace(tail, disorder=disorder) if tail else StreamTail(0, 0, 0, disorder)

    async def _check_order(self, js: JetStreamContext, spec: StreamSpec) -> str:
        """After a failed message: does the stream hold one of the session's later messages ahead of it?"""
        if self._first_failed is None:
            return ""
        stored = await read_msg_ids(js, spec, self._first_failed, len(self._predicted) + TAIL_SEARCH)
        overtaken = find_overtaken(self._predicted, stored)
        return overtaken.reason() if overtaken else ""

    def use_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    async def publish(self, batch: OutboundBatch, on_ack: AckCallback,
                      trace_headers: Mapping[str, str] | None = None) -> None:
        if self._dead_letters is not None and batch.dead_letter:
            await self._publish_dead_letters(batch, on_ack)
            return
        if self._failed is not None:
            on_ack(self._failed)
            return
        msg_id, payload = epoch_msg_id(batch.msg_id, self._epoch), encode_batch(batch, self._epoch)
        if self._stored_last is None:
            await self._publish_carefully(batch, msg_id, payload, on_ack, trace_headers)
            return
        expected = f"{HEADER_EXPECTED_LAST_SEQUENCE}: {self._stored_last}\r\n"
        # The prediction moves on even if this message never leaves: a successor must not be stored without it.
        self._stored_last = slot = self._stored_last + 1
        self._predicted[slot] = msg_id
        if len(self._predicted) > 2 * self._max_pending and self._first_failed is None:
            self._forget_settled()
        await self._send(batch.subject, msg_id, self._headers(batch, msg_id, expected, trace_headers), payload,
                         on_ack, slot=slot)

    def _forget_settled(self) -> None:
        """Drop the predictions older than the oldest unacknowledged chained message (all stored in order)."""
        oldest = next((entry[3] for entry in self._pending.values() if entry[3] > 0), self._stored_last or 0)
        for slot in list(itertools.takewhile(lambda s: s < oldest, self._predicted)):
            del self._predicted[slot]

    async def _publish_carefully(self, batch: OutboundBatch, msg_id: str, payload: bytes, on_ack: AckCallback,
                                 trace_headers: Mapping[str, str] | None) -> None:
        """Send and wait for the ack (the start of a session: duplicates, then the first new message)."""
        answer: asyncio.Future[tuple[int, bool] | None] = asyncio.get_running_loop().create_future()
        await self._send(batch.subject, msg_id, self._headers(batch, msg_id, "", trace_headers), payload, on_ack,
                         probe=answer)
        ack = await answer
        if ack is not None and not ack[1]:
            self._stored_last = self._first_new = ack[0]  # stored anew: duplicates are behind, pipelining starts

    async def _publish_dead_letters(self, batch: OutboundBatch, on_ack: AckCallback) -> None:
        """One dead letter per change and pipeline; `on_ack` once all of them are stored (or the first fails)."""
        assert self._dead_letters is not None
        messages = self._dead_letters.messages(batch)
        if not messages:
            on_ack(None)  # nothing of it is kept (baseline begin/end of such a table): done at once
            return
        all_acked = AllAcked(len(messages), on_ack)
        for subject, msg_id, payload in messages:
            headers = f"NATS/1.0\r\n{HEADER_MSG_ID}: {sanitize(msg_id)}\r\n\r\n".encode()
            await self._send(subject, msg_id, headers, payload, all_acked.one, slot=_DEAD_LETTER)

    async def _send(self, subject: str, msg_id: str, headers: bytes, payload: bytes, on_ack: AckCallback, *,
                    probe: asyncio.Future[tuple[int, bool] | None] | None = None, slot: int = _CAREFUL) -> None:
        """probe: resolved with (stream sequence, duplicate) of the ack, or None when the message failed."""
        await self._window.acquire()
        token = str(next(self._tokens))
        if probe is not None:
            self._probes[token] = probe
        self._pending[token] = (on_ack, asyncio.get_running_loop().time() + self._ack_timeout, msg_id, slot)
        self._idle.clear()
        try:
            sender = self._sender
            if sender is None or sender.client.is_closed:
                sender = self._sender = FastPublisher(await self._connection.client())
            await sender.publish(subject, f"{self._inbox}.{token}", headers, payload)
        except nats.errors.MaxPayloadError as exc:
            self._complete(token, PublishFailed(
                f"message {msg_id} is {len(payload)} bytes, more than the NATS max_payload allows; raise "
                "max_payload on the server or lower stream.max_batch_bytes", retryable=False))
            log.debug("max payload exceeded", exc_info=exc)
        except (nats.errors.Error, OSError, IngestError) as exc:
            self._complete(token, PublishFailed(f"publishing {msg_id} failed: {exc!r}"))
        except asyncio.CancelledError:
            self._complete(token, PublishFailed(f"publishing {msg_id} was cancelled"))
            raise
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.create_task(self._expire_overdue(), name="ingest-ack-deadline")

    def _headers(self, batch: OutboundBatch, msg_id: str, expected: str,
                 trace_headers: Mapping[str, str] | None) -> bytes:
        """The header block: one f-string per message, the trace lines encoded once per span."""
        if trace_headers is not self._trace_source:
            self._trace_source = trace_headers
            self._trace_lines = "".join(f"{k}: {sanitize(v)}\r\n" for k, v in (trace_headers or {}).items())
        end = f"{HEADER_END_LSN}: {format_lsn(batch.end_lsn)}\r\n" if batch.end_lsn else ""
        return (f"NATS/1.0\r\n{HEADER_MSG_ID}: {sanitize(msg_id)}\r\n{HEADER_KIND}: {batch.kind.value}\r\n"
                f"{HEADER_COMMIT_LSN}: {format_lsn(batch.commit_lsn)}\r\n"
                f"{HEADER_TABLE}: {sanitize(str(batch.schema.table))}\r\n{end}{expected}"
                f"{self._trace_lines}\r\n").encode()

    async def wait_for_acks(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        return self._idle.is_set()

    async def close(self) -> None:
        await cancel([self._watchdog])
        self._fail_all("the publisher closed")
        if self._subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._subscription.unsubscribe()
            self._subscription = None

    async def _listen_for_acks(self) -> None:
        client = await self._connection.client()
        self._sender = FastPublisher(client)
        if self._subscription is None:
            self._inbox = client.new_inbox()
            self._inbox_prefix = len(self._inbox) + 1
            self._subscription = await client.subscribe(f"{self._inbox}.*", cb=self._on_reply)
            intercept_replies(client, self._subscription._id, self._on_pub_ack)  # noqa: SLF001

    def _on_pub_ack(self, subject: bytes, data: bytes) -> None:
        """A header-less reply: a PubAck, or a JSON error from JetStream."""
        self._answered(subject[self._inbox_prefix:].decode(), data)

    async def _on_reply(self, msg: Msg) -> None:
        """A reply with headers (a 503 "no responders"), or any reply when intercept_replies() is unavailable."""
        self._answered(msg.subject[self._inbox_prefix:], msg.data, msg.headers)

    def _answered(self, token: str, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        entry = self._pending.get(token)
        if entry is None:
            return  # already timed out
        error = ack_error(data, headers, entry[2]) or self._stored_ahead(entry, data)
        self._complete(token, error, pub_ack(data) if error is None and token in self._probes else None)

    def _stored_ahead(self, entry: _Pending, data: bytes) -> IngestError | None:
        """A chained message acknowledged as a duplicate of one stored before the session's first new message
        (by an earlier session) is stored ahead of the earlier changes this session just stored."""
        if entry[3] <= 0 or b'"duplicate"' not in data:  # cheap checks first: this runs for every acknowledgement
            return None
        ack = pub_ack(data)
        if ack is None or self._first_new is None or ack[0] >= self._first_new:
            return None  # sent twice in this session: acknowledged, stored once
        self._disorder = (f"the change stream holds {entry[2]} at sequence {ack[0]}, ahead of the earlier changes "
                          f"ingest stored from sequence {self._first_new} on (a message ingest did not publish "
                          "took the place of one of its own in an earlier session); a new baseline replaces what "
                          "consumers hold (keep other clients from publishing to the source's subjects)")
        return PublishFailed(self._disorder)

    def _complete(self, token: str, error: IngestError | None, ack: tuple[int, bool] | None = None) -> None:
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        probe = self._probes.pop(token, None)
        if probe is not None and not probe.done():
            probe.set_result(ack)
        if error is None:
            self.acks += 1
            self.ack_seconds += time.monotonic() - entry[1] + self._ack_timeout  # the deadline is loop time
        elif entry[3] != _DEAD_LETTER:
            self._failed = self._failed or PublishFailed(
                f"not sent: {entry[2]}, published before it, failed ({error}); publishing starts again")
            if entry[3] > 0 and (self._first_failed is None or entry[3] < self._first_failed):
                self._first_failed = entry[3]
        self._window.release()
        if not self._pending:
            self._idle.set()
        entry[0](error)

    async def _expire_overdue(self) -> None:
        """Fail everything in flight once the oldest message is overdue: the session restarts anyway."""
        loop = asyncio.get_running_loop()
        while self._pending:
            _, deadline, msg_id, _ = next(iter(self._pending.values()))
            if loop.time() >= deadline:
                self._fail_all(f"no acknowledgement from JetStream for {msg_id} within {self._ack_timeout:g}s; "
                               "check the NATS server and the stream")
                return
            await asyncio.sleep(deadline - loop.time())

    def _fail_all(self, reason: str) -> None:
        for token in list(self._pending):
            self._complete(token, PublishFailed(reason))
