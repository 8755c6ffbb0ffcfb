"""One Sync stream: handshake, optional snapshot, journal catch-up, then live entries and heartbeats.

Invariants:
- snapshot + journal = complete state: the snapshot is copied and the journal pinned at its
  sequence in one step (no await in between), so no entry falls between them;
- entries are sent in sequence order, each exactly once per stream;
- the journal stays pinned at the resume sequence until the client is live; a live client
  that the journal's pruning overtakes is ended with ClientFellBehind (it re-syncs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from laredo_core.position import Position, PositionError

from laredo_fanout.application.client_registry import ClientState, ConnectedClient
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.errors import ClientFellBehind, EntriesPruned
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.sync_plan import SyncMode, SyncPlan, choose_sync_mode
from laredo_fanout.domain.table_state import StoredRow
from laredo_fanout.ports import Clock, Observer, SyncEncoder

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SyncRequestInfo:
    schema: str
    table: str
    last_known_sequence: int = 0
    last_snapshot_id: str = ""
    client_id: str = ""
    last_known_source_position: str = ""
    max_batch_size: int = 0  # > 1 opts into snapshot_rows / journal_batch messages


@dataclass(frozen=True, slots=True)
class _Snapshot:
    snapshot_id: str
    sequence: int
    rows: list[StoredRow]
    position: str


class SyncSession:
    """Yields the pre-serialized SyncResponse messages of one client's stream."""

    def __init__(self, replica: TableReplica, request: SyncRequestInfo, *, encoder: SyncEncoder, clock: Clock,
                 observer: Observer) -> None:
        self._replica = replica
        self._request = request
        self._encoder = encoder
        self._clock = clock
        self._observer = observer
        self._batch = max(1, request.max_batch_size)
        self.client_id = request.client_id or f"anon-{int(clock.now() * 1000)}"

    async def messages(self) -> AsyncIterator[bytes]:
        replica = self._replica
        await replica.wait_ready()
        client = replica.clients.register(self.client_id, self._clock.now())
        try:
            plan, snapshot = self._plan()
            pin = replica.journal.pin(plan.resume_from_sequence)
            client.sequence = plan.resume_from_sequence
            log.info("%s: client %s syncs with %s from sequence %d (%s)", replica.table, self.client_id,
                     plan.mode.value, plan.resume_from_sequence, plan.reason)
            try:
                yield self._handshake(plan)
                if snapshot is not None:
                    async for message in self._snapshot_messages(snapshot):
                        yield message
                async for message in self._catch_up(client):
                    yield message
            finally:
                replica.journal.unpin(pin)
            client.state = ClientState.LIVE
            async for message in self._live(client):
                yield message
        finally:
            replica.clients.unregister(client)

    def _plan(self) -> tuple[SyncPlan, _Snapshot | None]:
        """Choose the mode and, for a full snapshot, copy the rows at the current sequence: no await here."""
        journal = self._replica.journal
        plan = choose_sync_mode(
            last_known_sequence=self._request.last_known_sequence,
            position_resume_sequence=self._position_resume_sequence(),
            first_retained_sequence=journal.first_retained_sequence,
            current_sequence=journal.current_sequence,
            retained_snapshot=None,  # fan-out snapshots arrive in a later release
        )
        if plan.mode is not SyncMode.FULL_SNAPSHOT:
            return plan, None
        sequence = journal.current_sequence
        position = self._replica.applied_position
        snapshot = _Snapshot(f"fanout-{sequence}-{int(self._clock.now() * 1000)}", sequence,
                             self._replica.state.rows(), str(position) if position is not None else "")
        return plan, snapshot

    def _position_resume_sequence(self) -> int | None:
        text = self._request.last_known_source_position
        if not text:
            return None
        try:
            position = Position.parse(text)
        except PositionError as exc:
            log.warning("client %s sent an unparseable last_known_source_position (%s); ignored",
                        self.client_id, exc)
            return None
        return self._replica.journal.resume_after_position(position)

    def _handshake(self, plan: SyncPlan) -> bytes:
        journal = self._replica.journal
        return self._encoder.handshake(plan, current_sequence=journal.current_sequence,
                                       oldest_sequence=journal.oldest_sequence, columns=self._replica.columns)

    async def _snapshot_messages(self, snapshot: _Snapshot) -> AsyncIterator[bytes]:
        encoder, rows, step = self._encoder, snapshot.rows, self._batch
        yield encoder.snapshot_begin(snapshot_id=snapshot.snapshot_id, sequence=snapshot.sequence,
                                     row_count=len(rows), position=snapshot.position)
        for start in range(0, len(rows), step):
            yield encoder.snapshot_rows(rows[start: start + step])
        yield encoder.snapshot_end(sequence=snapshot.sequence, rows_sent=len(rows), position=snapshot.position)

    async def _catch_up(self, client: ConnectedClient) -> AsyncIterator[bytes]:
        """Every entry up to the current sequence; the pin guarantees none was pruned."""
        journal = self._replica.journal
        while entries := journal.entries_after(client.sequence, self._batch):
            yield self._send(client, entries)

    async def _live(self, client: ConnectedClient) -> AsyncIterator[bytes]:
        replica, loop = self._replica, asyncio.get_running_loop()
        interval = replica.limits.heartbeat_interval
        last_sent = loop.time()
        while True:
            appended = replica.appended()  # taken before the check, so no append slips between
            try:
                entries = replica.journal.entries_after(client.sequence, self._batch)
            except EntriesPruned as exc:
                raise ClientFellBehind(self.client_id, client.sequence, exc.oldest) from None
            if entries:
                yield self._send(client, entries)
                last_sent = loop.time()
                continue
            try:
                async with asyncio.timeout_at(last_sent + interval):
                    await appended.wait()
            except TimeoutError:
                yield self._encoder.heartbeat(current_sequence=replica.journal.current_sequence,
                                              server_time=self._clock.now())
                last_sent = loop.time()

    def _send(self, client: ConnectedClient, entries: list[JournalEntry]) -> bytes:
        message = self._encoder.journal_entries(entries)
        client.sequence = entries[-1].sequence
        self._observer.entries_sent(self._replica.table, self.client_id, entries)
        return message
