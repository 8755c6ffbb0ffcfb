"""LaredoClient: a live, indexed, local replica of one table, kept in sync by a fan-out server (asyncio)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import grpc

from laredo_client.backoff import Backoff
from laredo_client.client_replica import ClientReplica, Listener
from laredo_client.credentials import BearerToken, TlsOptions
from laredo_client.errors import ClientFailed
from laredo_client.indexed_state import PRIMARY_LOOKUP, Row
from laredo_client.options import DEFAULT_MAX_BATCH_SIZE, BackoffPolicy, ClientOptions, Filter, Index
from laredo_client.persistence import LocalSnapshot, load_local_snapshot, save_local_snapshot
from laredo_client.replication_loop import ReplicationLoop
from laredo_client.server_snapshot import bootstrap_from_server_snapshot
from laredo_client.stats import ClientStats
from laredo_client.stream_observer import StreamObserver
from laredo_client.values import Column

log = logging.getLogger(__name__)


class ReplicaReads:
    """Reads of the local rows and cursor, shared by LaredoClient and BlockingLaredoClient: they return copies
    and never block on the network."""

    _replica: ClientReplica
    stats: ClientStats

    def get(self, *primary_key: Any) -> Row | None:
        """The row with this primary key (values in primary key column order), or None."""
        row = self._replica.rows.get(primary_key)
        return dict(row) if row is not None else None

    def lookup(self, *values: Any) -> Row | None:
        """The row whose lookup fields (or primary key, when none are configured) have these values."""
        rows = self._replica.rows.lookup_all(PRIMARY_LOOKUP, values)
        return dict(rows[0]) if rows else None

    def lookup_all(self, index_name: str, *values: Any) -> list[Row]:
        """Every row the named index maps these values to (at most one for a unique index)."""
        return [dict(row) for row in self._replica.rows.lookup_all(index_name, values)]

    def all(self) -> list[Row]:
        return [dict(row) for row in self._replica.rows.rows()]

    def count(self) -> int:
        return len(self._replica.rows)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(old, new)` for every applied change: insert (None, new), update (old, new),
        delete (old, None), truncate (None, None). Snapshot rows do not fire, except that a re-sync reports its
        differences to the rows held before. The rows passed are the ones the client holds (and may share with
        other clients of this process): read them, copy them, never change them. Returns a function that
        removes the listener."""
        return self._replica.listen(listener)

    @property
    def last_sequence(self) -> int:
        """The last applied journal sequence of the current server instance (0 when unknown)."""
        return self._replica.cursor.sequence

    @property
    def last_source_position(self) -> str:
        return self._replica.cursor.source_position

    @property
    def snapshot_id(self) -> str:
        return self._replica.cursor.snapshot_id

    @property
    def columns(self) -> tuple[Column, ...]:
        return self._replica.columns

    @property
    def full_resyncs(self) -> int:
        return self.stats.full_resyncs


class LaredoClient(ReplicaReads):
    """Replicates `schema.table` from the fan-out server at `address` into local, indexed memory.

    Options: `local_snapshot_path` (saved on stop, loaded on start, so a restart resumes by DELTA);
    `lookup_fields` (the unique index `lookup()` reads; the primary key when empty); `indexes` (named
    unique and non-unique secondary indexes for `lookup_all()`); `client_id`; `filters` (rows the server sends:
    Filter.equals / prefix / is_in, AND-ed); `max_batch_size` (rows or entries per message, 100 by default;
    0 asks for one per message); `heartbeat_timeout` (seconds of silence, heartbeats included, after which the
    connection is dead); `backoff` (reconnect delays); `tls` (TlsOptions: CA, client certificate and key for
    mutual TLS, server name; an `https://host:port` address means TLS with the system's roots); `token` (a
    string or BearerToken: `BearerToken.from_env(...)`, `.from_file(...)`; sent as `authorization: Bearer ...`
    with every call); `channel_credentials` / `channel_options` (gRPC channel settings, instead of `tls`;
    messages of up to 64 MiB are accepted unless `grpc.max_receive_message_length` says otherwise);
    `bootstrap_from_server_snapshot` (without a usable local snapshot, start from the server's newest stored
    snapshot, fetched with FetchSnapshot, and Sync only the changes after it; not with `filters`);
    `stream_observer` (a StreamObserver shown every stream's request and messages: protocol checks, diagnostics).

    Reads (ReplicaReads) return copies and never block on the network. Listeners run on the event loop right
    after a change was applied: keep them quick.
    """

    def __init__(self, address: str, schema: str, table: str, *, local_snapshot_path: str | Path | None = None,
                 lookup_fields: Iterable[str] = (), indexes: Iterable[Index] = (), client_id: str = "",
                 filters: Iterable[Filter] = (), max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
                 heartbeat_timeout: float = 30.0, backoff: BackoffPolicy | None = None,
                 channel_credentials: grpc.ChannelCredentials | None = None,
                 channel_options: Iterable[tuple[str, Any]] = (), rng: random.Random | None = None,
                 bootstrap_from_server_snapshot: bool = False,
                 stream_observer: StreamObserver | None = None, tls: TlsOptions | None = None,
                 token: str | BearerToken | None = None) -> None:
        self.options = ClientOptions(
            address=address, schema=schema, table=table,
            local_snapshot_path=Path(local_snapshot_path) if local_snapshot_path else None,
            lookup_fields=tuple(lookup_fields), indexes=tuple(indexes), client_id=client_id,
            filters=tuple(filters), max_batch_size=max_batch_size, heartbeat_timeout=heartbeat_timeout,
            backoff=backoff or BackoffPolicy(), channel_credentials=channel_credentials,
            channel_options=tuple(channel_options), bootstrap_from_server_snapshot=bootstrap_from_server_snapshot,
            stream_observer=stream_observer, tls=tls,
            token=BearerToken.of(token) if isinstance(token, str) else token)
        if self.options.token is not None and not self.options.encrypted:
            log.warning("%s: the bearer token goes to %s without TLS, readable by anyone on the network path; "
                        "configure tls (or an https:// address) unless that network is trusted",
                        self._table_name, address)
        self.stats = ClientStats()
        self._replica = ClientReplica(self.options.lookup_fields, self.options.indexes)
        self._backoff = Backoff(self.options.backoff, rng)
        self._ready = asyncio.Event()
        self._stopped = asyncio.Event()
        self._failure: ClientFailed | None = None
        self._loop: ReplicationLoop | None = None
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the local snapshot (if any) and start replicating in the background; returns at once."""
        if self._loop is not None:
            raise RuntimeError(f"the client for {self._table_name} was already started (a stopped client "
                               f"cannot be restarted: create a new one)")
        path = self.options.local_snapshot_path
        if path is not None:
            snapshot = await asyncio.to_thread(load_local_snapshot, path, schema=self.options.schema,
                                               table=self.options.table, filters=self._filters_json())
            if snapshot is not None:
                self._replica.restore(snapshot.rows, snapshot.columns, snapshot.cursor)
                self.stats.restored_from_local = True
        self._loop = ReplicationLoop(self.options, self._replica, self.stats, self._backoff, self._ready.set)
        self._task = asyncio.create_task(self._replicate(self._loop), name=f"laredo-client {self._table_name}")

    async def _replicate(self, loop: ReplicationLoop) -> None:
        try:
            if self.options.bootstrap_from_server_snapshot and not self._replica.initialized:
                loop.status = f"fetching a server snapshot from {self.options.address}"
                snapshot = await bootstrap_from_server_snapshot(self.options, self._replica)
                self.stats.server_snapshot_id = snapshot.snapshot_id if snapshot is not None else ""
            await loop.run()
        except ClientFailed as exc:
            log.error("%s: replication stopped for good: %s", self._table_name, exc)
            self._failure = exc
        finally:
            self._stopped.set()

    async def await_ready(self, timeout: float = 30.0) -> None:
        """Wait until the rows are current: a full snapshot was installed, or a resume caught up with the
        server. Raises TimeoutError (naming what the client is doing) or ClientFailed."""
        if self._task is None:
            raise RuntimeError("call start() before await_ready()")
        ready, stopped = asyncio.ensure_future(self._ready.wait()), asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait((ready, stopped), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            stopped.cancel()
        if self._ready.is_set():
            return
        if self._failure is not None:
            raise self._failure
        if self._stopped.is_set():
            raise RuntimeError(f"the client for {self._table_name} was stopped before it became ready")
        raise TimeoutError(f"{self._table_name} not ready after {timeout:g}s; the client is {self.status}")

    async def stop(self) -> None:
        """Close the streams and save the local snapshot (if configured) for a fast restart. Idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if self.options.local_snapshot_path is not None and self._replica.initialized:
            try:
                await self.save_local_snapshot()
            except (OSError, TypeError, ValueError) as exc:
                log.error("could not save the local snapshot to %s (%s); the next start will need a full "
                          "snapshot", self.options.local_snapshot_path, exc)

    async def save_local_snapshot(self) -> None:
        """Write the rows and cursor to local_snapshot_path now (atomically); raises on failure."""
        path = self.options.local_snapshot_path
        if path is None:
            raise RuntimeError("no local_snapshot_path was configured")
        replica = self._replica
        with replica.rows.lock:  # rows are replaced, never mutated: a list of them is a consistent copy
            snapshot = LocalSnapshot(
                schema=self.options.schema, table=self.options.table, filters=self._filters_json(),
                server_address=self.options.address, cursor=dataclasses.replace(replica.cursor),
                rows=replica.rows.rows(), key_columns=replica.rows.key_columns, columns=replica.columns)
        await asyncio.to_thread(save_local_snapshot, path, snapshot)
        log.info("saved local snapshot %s: %d rows at source position %s", path, len(snapshot.rows),
                 snapshot.cursor.source_position or "(none)")

    async def __aenter__(self) -> LaredoClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def failure(self) -> ClientFailed | None:
        return self._failure

    @property
    def status(self) -> str:
        return self._loop.status if self._loop is not None else "not started"

    @property
    def _table_name(self) -> str:
        return f"{self.options.schema}.{self.options.table}"

    def _filters_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.options.filters]
