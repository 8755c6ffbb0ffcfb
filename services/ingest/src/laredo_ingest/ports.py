"""What the ingest use cases need from the outside world; adapters implement these, memory.py fakes them."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from laredo_kernel.changes import TableId

from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.errors import IngestError
from laredo_ingest.domain.prerequisites import PublicationChange, PublicationState, ServerFacts
from laredo_ingest.domain.schema import TableSchema
from laredo_ingest.domain.slot_retention import RetainedWal
from laredo_ingest.domain.start_plan import IngestState, SlotInfo, StreamTail

#: Called exactly once per published message: None when JetStream stored it (or dropped it as a
#: duplicate of a stored one), else the error (rejected, or no acknowledgement in time).
AckCallback = Callable[[IngestError | None], None]


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """The JetStream stream one source publishes to."""

    name: str
    subjects: tuple[str, ...]
    duplicate_window: float
    max_age: float  # seconds, 0 = unlimited
    max_bytes: int  # -1 = unlimited
    replicas: int


class ChangePublisher(Protocol):
    """Publishes stream messages to JetStream, pipelined, with at-least-once delivery.

    - ensure_stream() creates the stream or updates it to the spec, and returns the stream's last message
      (None: empty); call it before publishing. Every message after it must directly follow it.
    - use_epoch() sets the WAL epoch of every message published from then on.
    - publish() sends one message and returns once it is handed to the transport; it waits (backpressure)
      while the configured number of messages is unacknowledged. It never waits for this message's ack.
    - Messages are sent in the order publish() is called; acks may complete in any order.
    - on_ack is called exactly once per message (see AckCallback), from the event loop.
    - Idempotency: batch.msg_id is the Nats-Msg-Id; a message with an id stored within the duplicate
      window is acknowledged without being stored again.
    - wait_for_acks() returns when every published message has been acknowledged or failed.
    - One caller at a time (the ingest loop); not safe for concurrent publish() calls.
    """

    async def ensure_stream(self, spec: StreamSpec) -> StreamTail | None: ...

    def use_epoch(self, epoch: int) -> None: ...

    async def publish(self, batch: OutboundBatch, on_ack: AckCallback,
                      trace_headers: Mapping[str, str] | None = None) -> None: ...

    async def wait_for_acks(self, timeout: float) -> bool: ...


class SnapshotReader(Protocol):
    """Reads tables as of one exported snapshot (a REPEATABLE READ transaction that imported it)."""

    def copy_rows(self, schema: TableSchema, row_filter: str, chunk_rows: int, *,
                  chunk_bytes: int = 0) -> AsyncGenerator[list[bytes], None]:
        """Every row of the table matching row_filter (SQL, empty = all), with exactly schema.columns in that
        order, in chunks of up to chunk_rows, each row as TupleData (text values); a chunk also ends once its
        rows reach chunk_bytes (0: no byte bound), so memory stays bounded whatever the table and row size."""
        ...


class MessageSizeLimit(Protocol):
    """The largest message (headers and payload) the transport accepts: NATS max_payload, from the INFO of
    the server the connection is on (it connects if needed). Asked at every start of a session, since a
    reconnect may reach a server configured otherwise. 0 when unknown (then only max_batch_bytes applies)."""

    async def max_payload(self) -> int: ...


class SourceDatabase(Protocol):
    """SQL access to the source database over one connection; calls are made one at a time.

    Connection failures raise SourceUnavailable (retryable) naming host, port and database.
    publication() reports, per published table, its published columns and row filter (PostgreSQL 15).
    change_publication() applies a PublicationChange; a set_tables change runs in one transaction that is
    rolled back when it would change nothing, so an unchanged publication is not touched.
    """

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def server_facts(self) -> ServerFacts: ...

    async def describe_tables(self, tables: Sequence[TableId]) -> Mapping[TableId, TableSchema]:
        """Columns and replica identity of the tables that exist (missing ones are left out)."""
        ...

    async def publication(self, name: str) -> PublicationState | None: ...

    async def change_publication(self, name: str, change: PublicationChange) -> None: ...

    async def slot(self, name: str) -> SlotInfo | None: ...

    async def drop_slot(self, name: str) -> None: ...

    async def inactive_slots(self) -> Sequence[RetainedWal]:
        """Every replication slot of the server that no connection uses now, with the WAL it retains."""
        ...

    async def drop_publication(self, name: str) -> None: ...

    async def current_wal_lsn(self) -> int: ...

    async def row_estimates(self, tables: Sequence[TableId]) -> Mapping[TableId, int]:
        """The planner's row count estimate per table (pg_class.reltuples), for baseline progress."""
        ...

    def snapshot(self, snapshot_name: str) -> AbstractAsyncContextManager[SnapshotReader]:
        """Import an exported snapshot at once (before the exporting connection runs anything else)."""
        ...


@dataclass(frozen=True, slots=True)
class SystemIdentity:
    system_identifier: str
    database: str


@dataclass(frozen=True, slots=True)
class CreatedSlot:
    name: str
    consistent_lsn: int
    snapshot_name: str


class ReplicationStream(Protocol):
    """One walsender connection: slot creation, then the COPY BOTH stream of pgoutput frames.

    - create_slot() exports a snapshot that stays valid until this connection runs its next command (a
      temporary slot disappears with the connection).
    - start() begins pgoutput with the given proto_version (1 or 2) and, for 2, optionally streaming of
      in-progress transactions.
    - read_frames() returns at least one CopyData frame ('w' XLogData or 'k' keepalive) in server order,
      waiting as needed; it raises ReplicationInterrupted when the stream ends or the connection breaks.
      It is cancellation-safe: cancelled while it waits, it loses no frame (the next call returns it).
    - send_status() may be called while another task waits in read_frames(); reply_requested asks the
      server to answer at once with a keepalive (a liveness probe).
    - stop() sends CopyDone and waits for the server to end the stream; close() drops the connection.
    """

    async def open(self) -> SystemIdentity: ...

    async def create_slot(self, name: str, *, temporary: bool) -> CreatedSlot: ...

    async def start(self, slot: str, start_lsn: int, publication: str, *, protocol_version: int = 1,
                    streaming: bool = False) -> None: ...

    async def read_frames(self, max_frames: int) -> Sequence[bytes | memoryview]: ...

    async def send_status(self, write_lsn: int, flush_lsn: int, apply_lsn: int, *,
                          reply_requested: bool = False) -> None: ...

    async def stop(self) -> None: ...

    async def close(self) -> None: ...


class StateStore(Protocol):
    """Durable ingest state per source id (NATS KV). Writes are durable when put() returns;
    raises StateStoreUnavailable (retryable) when the store cannot be reached."""

    async def get(self, source_id: str) -> IngestState | None: ...

    async def put(self, source_id: str, state: IngestState) -> None: ...


class Span(Protocol):
    def set(self, key: str, value: Any) -> None: ...

    def trace_headers(self) -> dict[str, str]:
        """W3C trace context of this span, to put on messages published inside it."""
        ...


class Observer(Protocol):
    """Tracing and metrics for the use cases; the OpenTelemetry adapter turns them into OTel spans and
    instruments (metric names are prefixed `laredo.ingest.`).

    - span(): one unit of work; its trace context goes into the headers of messages published inside it.
    - gauges(): registers a reader called at each metrics collection; it returns current values by name
      (lag, rates, slot state, baseline progress). Called once, at start-up, from the composition root.
    All calls are cheap and never raise into the caller.
    """

    def span(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[Span]: ...

    def gauges(self, read: Callable[[], Mapping[str, float]]) -> None: ...


@dataclass(frozen=True, slots=True)
class IngestPorts:
    """The ports one ingest service uses, bundled for the composition root and the use cases."""

    database: Callable[[], SourceDatabase]  # a new, unopened connection per call
    replication: Callable[[], ReplicationStream]  # a new, unopened walsender connection per call
    publisher: ChangePublisher
    state: StateStore
    observer: Observer
    message_limit: MessageSizeLimit | None = None  # None: only stream.max_batch_bytes bounds messages
