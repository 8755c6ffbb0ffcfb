"""The DeadLetterStore port on NATS JetStream: one stream of JSON records, one subject per letter.

Stream `<PREFIX>_DEADLETTERS` keeps at most one message per subject
`<prefix>.deadletter.<source>.<schema>.<table>.<target-type>.<letter-id>`, so writing a letter again replaces it
for good, and `Nats-Msg-Id: <pipeline>:<letter-id>:r<replays>` stores once what instances that fail the same change
write at about the same time. The stream is created on the first write; a store without it yet holds nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from nats import errors as nats_errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from laredo_core.deadletters.config import DeadLetterSettings
from laredo_core.deadletters.model import (
    DeadLetter,
    DeadLetterPage,
    DeadLetterStoreError,
    DeadLetterStoreUnavailable,
    PipelineId,
)
from laredo_core.deadletters.records import decode_record, encode_record
from laredo_core.stream.naming import HEADER_MSG_ID, escape_token, stream_name
from laredo_core.stream.nats_connect import connect_nats
from laredo_core.stream.nats_servers import NatsServers

log = logging.getLogger(__name__)
T = TypeVar("T")

_UNREACHABLE = (TimeoutError, asyncio.TimeoutError, nats_errors.TimeoutError, nats_errors.NoRespondersError,
                nats_errors.NoServersError, nats_errors.ConnectionClosedError, nats_errors.StaleConnectionError,
                ServiceUnavailableError, OSError)
_STREAM_NOT_FOUND = 10059
_SUBJECTS_OVERLAP = 10065


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetterStreamSpec:
    """Limits of the dead-letter stream (0 / -1: unlimited); beyond them JetStream drops the oldest letters."""

    replicas: int = 1
    max_age: float = 0.0
    max_bytes: int = -1
    duplicate_window: float = 120.0


def dead_letter_stream(prefix: str) -> str:
    return stream_name(prefix, "deadletters")


def dead_letter_stream_config(prefix: str, spec: DeadLetterStreamSpec) -> StreamConfig:
    """The stream every writer creates when it is missing (one letter per subject)."""
    return StreamConfig(name=dead_letter_stream(prefix), subjects=[f"{prefix}.deadletter.>"], storage=StorageType.FILE,
                        max_msgs_per_subject=1, duplicate_window=spec.duplicate_window, max_age=spec.max_age,
                        max_bytes=spec.max_bytes, num_replicas=spec.replicas)


def stream_spec_from_settings(settings: DeadLetterSettings) -> DeadLetterStreamSpec:
    return DeadLetterStreamSpec(settings.replicas, settings.max_age, settings.max_bytes, settings.duplicate_window)


def pipeline_filter(prefix: str, pipeline: PipelineId) -> str:
    """Every letter subject of one pipeline."""
    return (f"{prefix}.deadletter.{escape_token(pipeline.source_id)}.{escape_token(pipeline.table.schema)}."
            f"{escape_token(pipeline.table.name)}.{escape_token(pipeline.target_type)}.*")


def letter_subject(prefix: str, pipeline: PipelineId, letter_id: str) -> str:
    return pipeline_filter(prefix, pipeline)[:-1] + escape_token(letter_id)


def letter_msg_id(letter: DeadLetter) -> str:
    return f"{letter.pipeline}:{letter.letter_id}:r{letter.replays}"


class NatsDeadLetterStore:
    """DeadLetterStore on JetStream; `timeout` bounds each call (connecting included)."""

    def __init__(self, urls: Sequence[str], subject_prefix: str, *, spec: DeadLetterStreamSpec | None = None,
                 client_name: str = "laredo", timeout: float = 5.0) -> None:
        self._urls = NatsServers.of(urls)
        self._prefix = subject_prefix
        self._spec = spec or DeadLetterStreamSpec()
        self._client_name = client_name
        self._timeout = timeout
        self.stream = dead_letter_stream(subject_prefix)
        self._nc: NatsClient | None = None
        self._connecting = asyncio.Lock()
        self._stream_ready = False

    async def write(self, letter: DeadLetter) -> None:
        payload = encode_record(letter)
        subject = letter_subject(self._prefix, letter.pipeline, letter.letter_id)

        async def publish(nc: NatsClient, js: JetStreamContext) -> None:
            await self._ensure_stream(js)
            await js.publish(subject, payload, timeout=self._timeout, headers={HEADER_MSG_ID: letter_msg_id(letter)})

        await self._call(f"writing dead letter {letter.letter_id} of {letter.pipeline}", publish)

    async def list(self, pipeline: PipelineId, *, limit: int = 0, after_sequence: int = 0) -> DeadLetterPage:
        subject = pipeline_filter(self._prefix, pipeline)

        async def read(nc: NatsClient, js: JetStreamContext) -> DeadLetterPage:
            try:
                newest = (await js.stream_info(self.stream)).state.last_seq
            except NotFoundError:
                return DeadLetterPage()
            total = await self._pending(js, subject)
            letters: list[DeadLetter] = []
            sequence = after_sequence + 1
            while (not limit or len(letters) < limit) and sequence <= newest:
                try:
                    message = await js.get_msg(self.stream, seq=sequence, subject=subject, next=True)
                except NotFoundError:
                    break
                sequence = (message.seq or sequence) + 1
                try:
                    letters.append(decode_record(message.data or b"", store_sequence=message.seq or 0))
                except ValueError as exc:
                    log.warning("skipping dead letter %s at %s sequence %s: %s", message.subject, self.stream,
                                message.seq, exc)
            return DeadLetterPage(tuple(letters), total, newest)

        return await self._call(f"listing the dead letters of {pipeline}", read)

    async def count(self, pipeline: PipelineId) -> int:
        subject = pipeline_filter(self._prefix, pipeline)
        return await self._call(f"counting the dead letters of {pipeline}", lambda nc, js: self._pending(js, subject))

    async def remove(self, pipeline: PipelineId, letter_ids: Iterable[str]) -> int:
        subjects = [letter_subject(self._prefix, pipeline, i) for i in dict.fromkeys(letter_ids)]

        async def remove(nc: NatsClient, js: JetStreamContext) -> int:
            return sum([await self._purge(nc, subject) for subject in subjects])

        return await self._call(f"removing dead letters of {pipeline}", remove)

    async def purge(self, pipeline: PipelineId) -> int:
        subject = pipeline_filter(self._prefix, pipeline)
        return await self._call(f"purging the dead letters of {pipeline}", lambda nc, js: self._purge(nc, subject))

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None and not nc.is_closed:
            await nc.close()

    async def _call(self, what: str, operation: Callable[[NatsClient, JetStreamContext], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._timeout):
                nc = await self._connection()
                return await operation(nc, nc.jetstream(timeout=self._timeout))
        except _UNREACHABLE as exc:
            raise DeadLetterStoreUnavailable(
                f"{what}: NATS at {', '.join(self._urls)} did not answer within {self._timeout:g}s ({exc!r}); "
                "check that nats-server runs with JetStream enabled") from exc
        except APIError as exc:
            raise DeadLetterStoreError(f"{what}: JetStream refused it: {exc.description} (code {exc.err_code})") \
                from exc

    async def _connection(self) -> NatsClient:
        async with self._connecting:
            if self._nc is None or self._nc.is_closed:
                self._stream_ready = False
                self._nc = await connect_nats(self._urls, name=self._client_name, connect_timeout=2,
                                              allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                              error_cb=_log_nats_error)
            return self._nc

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        if self._stream_ready:
            return
        config = dead_letter_stream_config(self._prefix, self._spec)
        try:
            info = await js.stream_info(self.stream)
        except NotFoundError:
            try:
                await js.add_stream(config)
            except APIError as exc:
                if exc.err_code != _SUBJECTS_OVERLAP:
                    raise
                raise DeadLetterStoreError(
                    f"cannot create the dead-letter stream {self.stream}: its subjects {config.subjects[0]} overlap "
                    "another stream's (a source named 'deadletter' publishes there); rename that source") from exc
            log.info("created JetStream stream %s for dead letters", self.stream)
        else:
            current = info.config
            if (current.max_age, current.max_bytes, current.num_replicas) != (config.max_age, config.max_bytes,
                                                                               config.num_replicas):
                await js.update_stream(config)
                log.info("updated dead-letter stream %s to the configured limits", self.stream)
        self._stream_ready = True

    async def _pending(self, js: JetStreamContext, subject: str) -> int:
        """How many messages match `subject`: the pending count of an ephemeral consumer filtered on it."""
        try:
            info = await js.add_consumer(self.stream, ConsumerConfig(
                filter_subject=subject, deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.EXPLICIT,
                mem_storage=True, inactive_threshold=30.0))
        except NotFoundError:
            return 0
        try:
            return int(info.num_pending or 0)
        finally:
            try:
                await js.delete_consumer(self.stream, info.name)
            except (APIError, *_UNREACHABLE) as exc:  # it expires by itself after inactive_threshold
                log.debug("ephemeral consumer %s not deleted: %r", info.name, exc)

    async def _purge(self, nc: NatsClient, subject: str) -> int:
        """Purge the stream's messages on `subject`; the server says how many it removed."""
        reply = await nc.request(f"$JS.API.STREAM.PURGE.{self.stream}", json.dumps({"filter": subject}).encode(),
                                 timeout=self._timeout)
        answer = json.loads(reply.data or b"{}")
        error = answer.get("error")
        if error:
            if error.get("err_code") == _STREAM_NOT_FOUND:
                return 0
            raise APIError(code=error.get("code"), err_code=error.get("err_code"),
                           description=error.get("description"))
        return int(answer.get("purged", 0))


async def _log_nats_error(error: Exception) -> None:
    log.warning("NATS (dead letters): %s (%s); the client keeps retrying", error or type(error).__name__,
                type(error).__name__)


def store_from_settings(settings: DeadLetterSettings, client_name: str) -> NatsDeadLetterStore | None:
    """The configured store, or None when dead letters are switched off (dead_letters.enabled = false)."""
    if not settings.enabled:
        return None
    return NatsDeadLetterStore(settings.nats_urls, settings.subject_prefix, spec=stream_spec_from_settings(settings),
                               client_name=client_name, timeout=settings.timeout)
