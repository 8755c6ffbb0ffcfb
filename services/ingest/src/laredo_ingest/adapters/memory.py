"""In-memory adapters for every port, with injectable faults: for unit tests and embedded runs.

The PostgreSQL side (SourceDatabase, ReplicationStream) lives in memory_source.py and is re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_core.stream.naming import epoch_msg_id

from laredo_ingest.adapters.memory_source import (
    MemoryReplicationStream,
    MemorySource,
    MemorySourceDatabase,
    WalBuilder,
)
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.errors import IngestError, PublishFailed, StateStoreUnavailable
from laredo_ingest.domain.publish_order import Overtaken
from laredo_ingest.domain.start_plan import IngestState, StreamTail
from laredo_ingest.ports import AckCallback, StreamSpec

__all__ = [
    "InMemoryChangePublisher", "InMemoryStateStore", "MemoryReplicationStream", "MemorySource",
    "MemorySourceDatabase", "PublishedMessage", "RecordingObserver", "RecordedSpan", "WalBuilder",
]


@dataclass(frozen=True, slots=True)
class PublishedMessage:
    batch: OutboundBatch
    headers: dict[str, str]
    epoch: int = 0


class InMemoryChangePublisher:
    """Stores batches like a JetStream stream would, deduplicating by msg_id, in order or not at all.

    As with the NATS adapter, a message is stored only if its predecessor was: once one is rejected, every
    later message that is not a duplicate is refused too, until ensure_stream() starts a new session.

    Faults: `fail_msg_ids` (rejected), `fail_next` (the next n messages are rejected), `hold_acks` (acks wait
    for release_acks(), in any order you pick), `ack_delay` seconds before each ack, `foreign_next` (a message
    another client writes takes the place of the next one, which is refused while later ones are stored, as
    JetStream does with pipelined messages: the next ensure_stream() reports the disorder).
    """

    def __init__(self, *, max_pending: int = 4000) -> None:
        self.spec: StreamSpec | None = None
        self.stored: list[PublishedMessage] = []
        self.duplicates = 0
        self.fail_msg_ids: set[str] = set()
        self.fail_next = 0
        self.hold_acks = False
        self.ack_delay = 0.0
        self.foreign_next = False
        self._overtaken: tuple[int, str] | None = None  # (sequence, msg id) of the message a foreign one replaced
        self._disorder = ""
        self._held: list[tuple[AckCallback, IngestError | None]] = []
        self._ids: set[str] = set()
        self._broken_after = ""  # the rejected message every later one of this session follows
        self.epoch = 0
        self._window = asyncio.Semaphore(max_pending)
        self._pending = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def ensure_stream(self, spec: StreamSpec) -> StreamTail | None:
        self.spec = spec
        self._broken_after, self._overtaken = "", None
        disorder, self._disorder = self._disorder, ""
        if not self.stored:
            return StreamTail(0, 0, 0, disorder) if disorder else None
        last = self.stored[-1]
        return StreamTail(len(self.stored), last.epoch, last.batch.commit_lsn, disorder)

    def use_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    async def publish(self, batch: OutboundBatch, on_ack: AckCallback,
                      trace_headers: Mapping[str, str] | None = None) -> None:
        if self.spec is None:
            raise PublishFailed("stream not ensured: call ensure_stream() first")
        await self._window.acquire()
        self._pending += 1
        self._idle.clear()
        error: IngestError | None = None
        msg_id = epoch_msg_id(batch.msg_id, self.epoch)
        if batch.msg_id in self.fail_msg_ids or self.fail_next > 0:
            self.fail_next = max(0, self.fail_next - 1)
            error = PublishFailed(f"JetStream rejected {batch.msg_id} (test fault)")
            self._broken_after = self._broken_after or batch.msg_id
        elif msg_id in self._ids:
            self.duplicates += 1
        elif self._broken_after:
            error = PublishFailed(f"JetStream refused {batch.msg_id}: {self._broken_after}, published before "
                                  "it, is not stored")
        elif self.foreign_next:
            self.foreign_next = False
            self._overtaken = (len(self.stored) + 1, msg_id)
            error = PublishFailed(f"JetStream refused {batch.msg_id}: another client's message took its place")
        else:
            self._ids.add(msg_id)
            self.stored.append(PublishedMessage(batch, dict(trace_headers or {}), self.epoch))
            if self._overtaken is not None and not self._disorder:
                self._disorder = Overtaken(self._overtaken[0], self._overtaken[1], "", len(self.stored) + 1,
                                           msg_id).reason()
        if self.hold_acks:
            self._held.append((on_ack, error))
        else:
            asyncio.get_running_loop().call_later(self.ack_delay, self._complete, on_ack, error)

    def release_acks(self, order: list[int] | None = None) -> None:
        """Deliver held acks, in the given index order (default: publish order)."""
        held, self._held = self._held, []
        for index in order if order is not None else range(len(held)):
            self._complete(*held[index])

    async def wait_for_acks(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        return self._idle.is_set()

    def _complete(self, on_ack: AckCallback, error: IngestError | None) -> None:
        self._pending -= 1
        self._window.release()
        if not self._pending:
            self._idle.set()
        on_ack(error)


class InMemoryStateStore:
    def __init__(self) -> None:
        self.states: dict[str, IngestState] = {}
        self.puts: list[IngestState] = []
        self.unavailable = False

    async def get(self, source_id: str) -> IngestState | None:
        self._check()
        return self.states.get(source_id)

    async def put(self, source_id: str, state: IngestState) -> None:
        self._check()
        self.states[source_id] = state
        self.puts.append(state)

    def _check(self) -> None:
        if self.unavailable:
            raise StateStoreUnavailable("in-memory state store is set unavailable")


@dataclass(slots=True)
class RecordedSpan:
    name: str
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    values: dict[str, Any] = field(default_factory=dict)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def trace_headers(self) -> dict[str, str]:
        return {"traceparent": f"00-{self.trace_id}-{self.span_id}-01"}


class RecordingObserver:
    def __init__(self) -> None:
        self.spans: list[RecordedSpan] = []
        self.gauge_readers: list[Callable[[], Mapping[str, float]]] = []
        self._ids = itertools.count(1)

    def gauges(self, read: Callable[[], Mapping[str, float]]) -> None:
        self.gauge_readers.append(read)

    @contextlib.contextmanager
    def span(self, name: str, attributes: Mapping[str, Any]) -> Iterator[RecordedSpan]:
        n = next(self._ids)
        span = RecordedSpan(name, dict(attributes), f"{n:032x}", f"{n:016x}")
        self.spans.append(span)
        yield span
