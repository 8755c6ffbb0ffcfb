"""What one Sync stream sends, in order: handshake, snapshot, catch-up, then live entries, into its buffer.

The producer reads the shared journal through its own cursor and queues serialized messages in the client's short
SendBuffer, only when it has room: entries the client has yet to get wait in the journal, and a batched client
receives whatever piled up meanwhile in one message. The client's lag (entries appended and not yet offered to it,
plus those queued and not yet written) is its buffer in the sense of client_buffer.max_size, in every phase: beyond
it, drop_disconnect ends the client, slow_down releases the journal's pin and goes on at its pace (until pruning
overtakes it); the lag is checked as entries are appended, within TableReplica's BACKLOG_CHECK_INTERVAL while the
client is still taking earlier messages. Schema change notifications are queued right after the entry they follow;
heartbeats when nothing was queued for heartbeat_interval; GoAway once, when draining, whatever the phase (right after
the handshake at the earliest).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from laredo_kernel.changes import Action

from laredo_fanout.application.client_registry import ClientState, ConnectedClient
from laredo_fanout.application.send_buffer import Outgoing, SendBuffer, first_done
from laredo_fanout.application.table_replica import SchemaChange, TableReplica
from laredo_fanout.domain.client_buffer import LagAction, Phase, client_lag, lag_action, pin_expired
from laredo_fanout.domain.errors import ClientFellBehind, ClientTooSlow, EntriesPruned
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.subscription_filter import EntryRoute, SubscriptionFilter
from laredo_fanout.domain.sync_plan import SyncMode, SyncPlan
from laredo_fanout.domain.table_state import StoredRow
from laredo_fanout.ports import Clock, SyncEncoder

log = logging.getLogger(__name__)
_SKIP_STEP = 256  # entries looked at per journal read while skipping what a filter does not want


@dataclass(frozen=True, slots=True)
class SnapshotCopy:
    snapshot_id: str
    sequence: int
    rows: list[StoredRow]
    position: str


class SessionProducer:
    """Pins the journal at the plan's resume sequence when created; unpin() once the client is live. The pin is
    released early when the client falls `client_buffer.max_size` entries behind (drop_disconnect ends the stream
    instead) or once `client_buffer.catch_up_timeout` passed: no client holds the journal beyond its limits by
    more than that, whatever its phase."""

    def __init__(self, replica: TableReplica, client: ConnectedClient, buffer: SendBuffer, plan: SyncPlan, *,
                 encoder: SyncEncoder, clock: Clock, subscription: SubscriptionFilter | None, batch: int) -> None:
        self._replica = replica
        self._journal = replica.journal
        self._limits = replica.limits.buffer
        self._client = client
        self._buffer = buffer
        self._plan = plan
        self._encoder = encoder
        self._clock = clock
        self._filter = subscription
        self._batch = batch
        self._phase = Phase.CATCH_UP
        self._told_to_leave = False
        self._pin: int | None = replica.journal.pin(plan.resume_from_sequence)
        self._pinned_at = asyncio.get_running_loop().time()
        self._cursor = client.sequence = client.offered = plan.resume_from_sequence
        # The backlog a delta client starts with was retained anyway: only what is appended after it joined
        # counts against its limits, or catching up on more than max_size entries would always fail.
        self._joined_at = replica.journal.current_sequence
        self._schema_index = self._schema_changes_already_shown()

    def unpin(self) -> None:
        """Release the pin; what it kept beyond the journal's limits goes at once, not at the next append."""
        if self._pin is not None:
            self._journal.unpin(self._pin)
            self._pin = None
            self._journal.prune(self._clock.now())

    async def run(self, snapshot: SnapshotCopy | None) -> None:
        journal = self._journal
        self._buffer.push(Outgoing(self._encoder.handshake(self._plan, current_sequence=journal.current_sequence,
                                                           oldest_sequence=journal.oldest_sequence,
                                                           columns=self._replica.columns)))
        if snapshot is not None:
            self._phase = Phase.SNAPSHOT
            await self._send_snapshot(snapshot)
            self._phase = Phase.CATCH_UP
        while (item := self._next()) is not None:  # catch-up: pinned (within limits), so nothing is pruned under us
            if item.message:
                await self._put(item)
        self.unpin()
        self._phase = Phase.LIVE
        if self._client.state is ClientState.CATCHING_UP:
            self._client.state = ClientState.LIVE
        await self._live()

    async def _send_snapshot(self, snapshot: SnapshotCopy) -> None:
        encoder, rows, step, put = self._encoder, snapshot.rows, self._batch, self._put
        if self._filter is not None:  # each row read back into values: a worker thread's job on a large table
            wanted, decode = self._filter.matches, self._replica.state.decode
            rows = await asyncio.to_thread(list, (row for row in rows if wanted(decode(row))))
        await put(Outgoing(encoder.snapshot_begin(snapshot_id=snapshot.snapshot_id, sequence=snapshot.sequence,
                                                  row_count=len(rows), position=snapshot.position)))
        for start in range(0, len(rows), step):
            chunk = rows[start:start + step]
            await put(Outgoing(encoder.snapshot_rows(chunk), len(chunk)))
        await put(Outgoing(encoder.snapshot_end(sequence=snapshot.sequence, rows_sent=len(rows),
                                                position=snapshot.position), 0, snapshot.sequence))

    async def _put(self, item: Outgoing) -> None:
        """Queue the item once there is room; while the client is not taking messages, every append (and the
        pin's deadline) wakes this to apply the limits, so a client that stops reading cannot hold the journal."""
        buffer = self._buffer
        while True:
            grew = self._replica.grew()  # taken before the checks, so no append slips between
            self._watch()
            if buffer.has_room():
                buffer.push(item)
                return
            await first_done((buffer.room(), grew), self._pin_time_left())

    async def _live(self) -> None:
        replica, buffer, loop = self._replica, self._buffer, asyncio.get_running_loop()
        interval = replica.limits.heartbeat_interval
        last_queued = loop.time()
        while True:
            appended, grew = replica.appended(), replica.grew()  # taken before the checks: no append slips between
            self._watch()
            if not buffer.has_room():
                # The client is still taking earlier messages: new entries wait in the journal and join the next
                # message. Appends wake this meanwhile (a tenth of a second apart at most) to check the client's
                # lag, which a stuck write never would.
                await first_done((buffer.room(), grew))
                continue
            item = self._next()
            if item is not None:
                if item.message:
                    buffer.push(item)
                last_queued = loop.time()
                continue
            if not await first_done((appended,), last_queued + interval - loop.time()):
                buffer.offer(Outgoing(self._encoder.heartbeat(current_sequence=replica.journal.current_sequence,
                                                              server_time=self._clock.now())))
                last_queued = loop.time()

    def _watch(self) -> None:
        """GoAway once draining; the pin's deadline; the client's lag against client_buffer (any phase)."""
        replica, client = self._replica, self._client
        if self._filter is not None and not self._buffer.has_room():
            self._skip_unwanted()
        if replica.drain is not None and not self._told_to_leave:
            self._buffer.push(Outgoing(self._encoder.go_away(
                reason=replica.drain.reason, drain_deadline_unix_ms=replica.drain.deadline_unix_ms)))
            client.state = ClientState.DRAINING
            self._told_to_leave = True
        if self._pin is not None and pin_expired(self._limits, self._pinned_for()):
            self._release_pin(f"its {self._phase.value} took longer than client_buffer.catch_up_timeout "
                              f"({self._limits.catch_up_timeout:g}s)")
        lag = client_lag(self._journal.current_sequence, self._cursor, self._buffer.journal_depth, self._joined_at)
        action = lag_action(self._limits, lag)
        if action is LagAction.DISCONNECT:
            raise ClientTooSlow(client.client_id, self._limits.max_size, client.sequence, self._phase.value)
        if action is LagAction.SLOW_DOWN:
            self._release_pin(f"it is more than client_buffer.max_size ({self._limits.max_size}) entries behind")
            if self._phase is Phase.LIVE:
                client.state = ClientState.BACKPRESSURED
        elif client.state is ClientState.BACKPRESSURED:
            client.state = ClientState.DRAINING if self._told_to_leave else ClientState.LIVE
        oldest = self._journal.first_retained_sequence
        if self._cursor + 1 < oldest:  # pruning overtook a client that stopped reading: end it now
            raise ClientFellBehind(client.client_id, self._cursor, oldest)

    def _release_pin(self, why: str) -> None:
        if self._pin is None:
            return
        self.unpin()
        log.warning("%s: the journal no longer waits for client %s (%s phase, after sequence %d): %s",
                    self._replica.table, self._client.client_id, self._phase.value, self._cursor, why)

    def _pinned_for(self) -> float:
        return asyncio.get_running_loop().time() - self._pinned_at

    def _pin_time_left(self) -> float | None:
        if self._pin is None or not self._limits.catch_up_timeout:
            return None
        return max(0.0, self._limits.catch_up_timeout - self._pinned_for())

    def _next(self) -> Outgoing | None:
        """The next message after the cursor (an empty one when a filter skipped every entry); None: nothing new."""
        change = self._pending_schema_change()
        if change is not None and change.after_sequence <= self._cursor:
            self._schema_index = change.index
            return Outgoing(change.message)
        limit = self._batch
        if self._journal.current_sequence - self._cursor > limit:
            # more than a batch behind: the chunk ends on a multiple of the batch size, so clients catching up
            # read the same chunks and share their messages (TableReplica.journal_message)
            limit -= self._cursor % limit
        if change is not None:
            limit = min(limit, change.after_sequence - self._cursor)
        try:
            entries = self._journal.entries_after(self._cursor, limit)
        except EntriesPruned as exc:
            raise ClientFellBehind(self._client.client_id, self._cursor, exc.oldest) from None
        if not entries:
            return None
        self._cursor = self._client.offered = last = entries[-1].sequence
        if self._filter is not None:
            entries = [e for e in map(self._routed, entries) if e is not None]
            if not entries:
                if not self._buffer.depth:
                    self._client.sequence = last
                return Outgoing(b"", 0, last)
            return Outgoing(self._encoder.journal_entries(entries), len(entries), last, entries)
        return Outgoing(self._replica.journal_message(entries), len(entries), last, entries)

    def _skip_unwanted(self) -> None:
        """Offer a filtered client the entries its filter skips while its buffer is full: they are behind it
        at once, so they neither count as its lag nor wait for its reading (up to the next pending schema change
        or the first entry it does want)."""
        assert self._filter is not None
        change = self._pending_schema_change()
        stop = change.after_sequence if change is not None else self._journal.current_sequence
        route, read = self._filter.route, self._replica.read_entry
        while self._cursor < stop:
            try:
                entries = self._journal.entries_after(self._cursor, min(stop - self._cursor, _SKIP_STEP))
            except EntriesPruned:
                return  # _watch ends the stream
            for entry in entries:
                rows = read(entry)
                if route(rows.action, rows.old, rows.new) is not EntryRoute.SKIP:
                    return
                self._cursor = self._client.offered = entry.sequence
            if not entries:
                return

    def _routed(self, entry: JournalEntry) -> JournalEntry | None:
        assert self._filter is not None
        rows = self._replica.read_entry(entry)
        route = self._filter.route(rows.action, rows.old, rows.new)
        if route is EntryRoute.SEND:
            return entry
        if route is EntryRoute.SKIP:
            return None
        # the row entered or left the client's filter: an INSERT of the new row or a DELETE of the old one
        action = Action.DELETE if route is EntryRoute.AS_DELETE else Action.INSERT
        return JournalEntry(entry.sequence, entry.position, self._encoder.entry_as(entry.encoded, action),
                            entry.appended_at, entry.trace)

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
