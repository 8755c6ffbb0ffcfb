"""What one Sync stream sends, in order: handshake, snapshot, catch-up, then live entries, into its buffer.

The producer reads the shared journal through its own cursor and queues serialized messages in the
client's short SendBuffer, only when it has room: entries the client has yet to get wait in the journal,
and a batched client receives whatever piled up meanwhile in one message. The client's lag (entries
appended but not yet written to it) is its buffer in the sense of client_buffer.max_size: beyond it,
drop_disconnect ends the client, slow_down marks it backpressured and goes on at its pace (until
pruning overtakes it). Schema change notifications are queued right after the entry they follow;
heartbeats when nothing was queued for heartbeat_interval; GoAway once, when draining.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

from laredo_core.changes import Action

from laredo_fanout.application.client_registry import ClientState, ConnectedClient
from laredo_fanout.application.send_buffer import Outgoing, SendBuffer
from laredo_fanout.application.table_replica import SchemaChange, TableReplica
from laredo_fanout.domain.client_buffer import BufferPolicy
from laredo_fanout.domain.errors import ClientFellBehind, ClientTooSlow, EntriesPruned
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.subscription_filter import EntryRoute, SubscriptionFilter
from laredo_fanout.domain.sync_plan import SyncMode, SyncPlan
from laredo_fanout.domain.table_state import StoredRow
from laredo_fanout.ports import Clock, SyncEncoder


_LAG_CHECK = 0.1  # seconds between lag checks while a client's write is pending


@dataclass(frozen=True, slots=True)
class SnapshotCopy:
    snapshot_id: str
    sequence: int
    rows: list[StoredRow]
    position: str


class SessionProducer:
    """Pins the journal at the plan's resume sequence when created; unpin() once the client is live."""

    def __init__(self, replica: TableReplica, client: ConnectedClient, buffer: SendBuffer, plan: SyncPlan, *,
                 encoder: SyncEncoder, clock: Clock, subscription: SubscriptionFilter | None, batch: int) -> None:
        self._replica = replica
        self._journal = replica.journal
        self._client = client
        self._buffer = buffer
        self._plan = plan
        self._encoder = encoder
        self._clock = clock
        self._filter = subscription
        self._batch = batch
        self._pin: int | None = replica.journal.pin(plan.resume_from_sequence)
        self._cursor = client.sequence = plan.resume_from_sequence
        self._schema_index = self._schema_changes_already_shown()

    def unpin(self) -> None:
        if self._pin is not None:
            self._journal.unpin(self._pin)
            self._pin = None

    async def run(self, snapshot: SnapshotCopy | None) -> None:
        journal, put = self._journal, self._buffer.put
        await put(Outgoing(self._encoder.handshake(self._plan, current_sequence=journal.current_sequence,
                                                   oldest_sequence=journal.oldest_sequence,
                                                   columns=self._replica.columns)))
        if snapshot is not None:
            await self._send_snapshot(snapshot)
        while (item := self._next()) is not None:  # catch-up: pinned, so nothing is pruned under us
            if item.message:
                await put(item)
        self.unpin()
        self._client.state = ClientState.LIVE
        await self._live()

    async def _send_snapshot(self, snapshot: SnapshotCopy) -> None:
        encoder, rows, step, put = self._encoder, snapshot.rows, self._batch, self._buffer.put
        await put(Outgoing(encoder.snapshot_begin(snapshot_id=snapshot.snapshot_id, sequence=snapshot.sequence,
                                                  row_count=len(rows), position=snapshot.position)))
        for start in range(0, len(rows), step):
            chunk = rows[start:start + step]
            await put(Outgoing(encoder.snapshot_rows(chunk), len(chunk)))
        await put(Outgoing(encoder.snapshot_end(sequence=snapshot.sequence, rows_sent=len(rows),
                                                position=snapshot.position), 0, snapshot.sequence))

    async def _live(self) -> None:
        replica, buffer, loop = self._replica, self._buffer, asyncio.get_running_loop()
        interval = replica.limits.heartbeat_interval
        last_queued = loop.time()
        told_to_leave = False
        while True:
            if replica.drain is not None and not told_to_leave:
                buffer.push(Outgoing(self._encoder.go_away(
                    reason=replica.drain.reason, drain_deadline_unix_ms=replica.drain.deadline_unix_ms)))
                self._client.state = ClientState.DRAINING
                told_to_leave = True
            appended = replica.appended()  # taken before the checks, so no append slips between
            self._check_lag(told_to_leave)
            if not buffer.has_room():
                # The client is still taking earlier messages: new entries wait in the journal and join the next
                # message. Only its lag needs watching meanwhile, which a stuck write would never trigger.
                await asyncio.wait((buffer.room(),), timeout=_LAG_CHECK)
                continue
            try:
                item = self._next()
            except EntriesPruned as exc:
                raise ClientFellBehind(self._client.client_id, self._cursor, exc.oldest) from None
            if item is not None:
                if item.message:
                    buffer.push(item)
                last_queued = loop.time()
                continue
            done, _ = await asyncio.wait((appended,), timeout=last_queued + interval - loop.time())
            if not done:
                buffer.offer(Outgoing(self._encoder.heartbeat(current_sequence=replica.journal.current_sequence,
                                                              server_time=self._clock.now())))
                last_queued = loop.time()

    def _check_lag(self, draining: bool) -> None:
        """Entries appended but not yet written to the client, against client_buffer.max_size."""
        client, limits = self._client, self._replica.limits.buffer
        lag = self._journal.current_sequence - client.sequence
        if lag <= limits.max_size:
            if client.state is ClientState.BACKPRESSURED:
                client.state = ClientState.DRAINING if draining else ClientState.LIVE
            return
        if limits.policy is BufferPolicy.DROP_DISCONNECT:
            raise ClientTooSlow(client.client_id, limits.max_size, client.sequence)
        client.state = ClientState.BACKPRESSURED

    def _next(self) -> Outgoing | None:
        """The next message after the cursor (an empty one when a filter skipped every entry); None: nothing new."""
        change = self._pending_schema_change()
        if change is not None and change.after_sequence <= self._cursor:
            self._schema_index = change.index
            return Outgoing(change.message)
        limit = self._batch if change is None else min(self._batch, change.after_sequence - self._cursor)
        entries = self._journal.entries_after(self._cursor, limit)
        if not entries:
            return None
        self._cursor = last = entries[-1].sequence
        if self._filter is not None:
            entries = [e for e in map(self._routed, entries) if e is not None]
            if not entries:
                if not self._buffer.depth:
                    self._client.sequence = last
                return Outgoing(b"", 0, last)
        return Outgoing(self._encoder.journal_entries(entries), len(entries), last, entries)

    def _routed(self, entry: JournalEntry) -> JournalEntry | None:
        assert self._filter is not None
        route = self._filter.route(entry.action, entry.old.values if entry.old else None,
                                   entry.new.values if entry.new else None)
        if route is EntryRoute.SEND:
            return entry
        if route is EntryRoute.SKIP:
            return None
        action = Action.DELETE if route is EntryRoute.AS_DELETE else Action.INSERT
        old, new = (entry.old, None) if action is Action.DELETE else (None, entry.new)
        encoded = self._encoder.journal_entry(sequence=entry.sequence, position=entry.source_position,
                                              commit_time_unix_us=entry.commit_time_unix_us, xid=entry.xid,
                                              action=action, old=old, new=new)
        return dataclasses.replace(entry, action=action, old=old, new=new, encoded=encoded)

    def _schema_changes_already_shown(self) -> int:
        """The index of the last schema change the handshake's columns already show: a full snapshot shows
        them all; a delta client has not seen those after its resume sequence."""
        changes = self._replica.schema_changes
        if not changes:
            return 0
        if self._plan.mode is SyncMode.FULL_SNAPSHOT:
            return changes[-1].index
        unseen = next((c for c in changes if c.after_sequence >= self._cursor), None)
        return unseen.index - 1 if unseen is not None else changes[-1].index

    def _pending_schema_change(self) -> SchemaChange | None:
        changes = self._replica.schema_changes
        if not changes or changes[-1].index <= self._schema_index:
            return None
        return next(c for c in changes if c.index > self._schema_index)
