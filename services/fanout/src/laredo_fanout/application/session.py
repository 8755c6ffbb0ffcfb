"""One Sync stream: a producer fills the client's bounded send buffer, a writer empties it into the stream.

Invariants:
- snapshot + journal = complete state: the mode is chosen, the snapshot copied and the journal
  pinned at its sequence in one step (no await in between), so no entry falls between them;
- entries are queued in sequence order, each once per stream (a filtered client skips some);
- the journal stays pinned at the producer's cursor until every catch-up entry is queued; a live
  client that pruning overtakes is ended with ClientFellBehind (it re-syncs);
- the apply path never waits for a client: it only appends to the journal and sets an event; a
  client that does not read fills its own buffer, and the policy (drop_disconnect, slow_down)
  decides what happens then; the other clients are not affected;
- when the target drains: GoAway once the client is live, streaming goes on until the client
  leaves or the deadline passes, then the stream ends cleanly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from laredo_kernel.position import Position, PositionError

from laredo_fanout.application.client_registry import ConnectedClient
from laredo_fanout.application.send_buffer import Outgoing, SendBuffer
from laredo_fanout.application.session_producer import SessionProducer, SnapshotCopy
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.errors import InstanceBehind, TargetDrained
from laredo_core.runtime import cancel
from laredo_core.snapshots.format import SnapshotManifest
from laredo_fanout.domain.journal import position_reached
from laredo_fanout.domain.subscription_filter import FieldPredicate, SubscriptionFilter
from laredo_fanout.domain.sync_plan import JournalIdentity, RetainedSnapshot, SyncMode, SyncPlan, choose_sync_mode
from laredo_fanout.ports import Clock, Observer, SyncEncoder

log = logging.getLogger(__name__)

#: Messages serialized ahead of the client's stream: one for batched clients, so entries that arrive while it is
#: written join the next message; more for one-entry-per-message clients, so the producer wakes less often.
_READ_AHEAD_BATCHED, _READ_AHEAD = 1, 64
#: Writes one message to the client's stream; returns once the transport took it.
WriteMessage = Callable[[bytes], Awaitable[object]]
#: Finds a retained snapshot of the session's table by id (None: unknown).
SnapshotLookup = Callable[[str], Awaitable[SnapshotManifest | None]]


@dataclass(frozen=True, slots=True)
class SyncRequestInfo:
    schema: str
    table: str
    last_known_sequence: int = 0
    last_snapshot_id: str = ""
    client_id: str = ""
    last_known_source_position: str = ""
    max_batch_size: int = 0  # > 1 opts into snapshot_rows / journal_batch messages
    filters: tuple[FieldPredicate, ...] = ()
    identify_instance: bool = False  # name the instance and journal epoch in the handshake
    last_known_instance_id: str = ""  # who issued last_known_sequence (the handshake's instance_id)
    last_known_journal_epoch: str = ""


class SyncSession:
    def __init__(self, replica: TableReplica, request: SyncRequestInfo, *, encoder: SyncEncoder, clock: Clock,
                 observer: Observer, subscription: SubscriptionFilter | None = None,
                 find_snapshot: SnapshotLookup | None = None, instance_id: str = "") -> None:
        self._replica = replica
        self._instance_id = instance_id  # with the journal's epoch, who numbers this session's sequences
        self._request = request
        self._encoder = encoder
        self._clock = clock
        self._observer = observer
        self._filter = subscription
        self._find_snapshot = find_snapshot
        self.client_id = request.client_id or f"anon-{int(clock.now() * 1000)}"

    async def serve(self, write: WriteMessage) -> None:
        """Run the stream until the client leaves (cancellation), an error ends it, or a drain deadline passes."""
        replica = self._replica
        await replica.wait_ready()
        if replica.drain_ended.is_set():
            raise TargetDrained(f"{replica.table} on this instance is drained; connect to another instance")
        snapshot_id, find_snapshot = self._request.last_snapshot_id, self._find_snapshot
        retained = await find_snapshot(snapshot_id) if snapshot_id and find_snapshot is not None else None
        await self._wait_for_resume_position(retained)
        client = replica.clients.register(self.client_id, self._clock.now())
        batch = max(1, self._request.max_batch_size)
        buffer = client.buffer = SendBuffer(_READ_AHEAD_BATCHED if batch > 1 else _READ_AHEAD)
        try:
            plan, snapshot = self._plan(retained)  # no await from here until the pin is taken
            producer = SessionProducer(replica, client, buffer, plan, encoder=self._encoder, clock=self._clock,
                                       subscription=self._filter, batch=batch)
            log.info("%s: client %s syncs with %s from sequence %d (%s)", replica.table, self.client_id,
                     plan.mode.value, plan.resume_from_sequence, plan.reason)
            try:
                await self._run(producer.run(snapshot), self._deliver(client, buffer, write))
            finally:
                producer.unpin()
        finally:
            replica.clients.unregister(client)

    async def _run(self, produce: Awaitable[None], deliver: Awaitable[None]) -> None:
        """Producer and writer side by side; the first failure ends both, a drain deadline ends them cleanly."""
        tasks = [asyncio.ensure_future(produce), asyncio.ensure_future(deliver),
                 asyncio.ensure_future(self._replica.drain_ended.wait())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks[:2]:
                if task in done:
                    task.result()  # a failure (client too slow, fell behind, write error) ends the stream
            if tasks[2] in done:
                log.info("%s: drain deadline passed; ending the stream of client %s", self._replica.table,
                         self.client_id)
        finally:
            await cancel(tasks)  # the first failure, raised above, is the one

    async def _deliver(self, client: ConnectedClient, buffer: SendBuffer, write: WriteMessage) -> None:
        table, client_id, observer = self._replica.table, self.client_id, self._observer
        while True:
            item = await buffer.get()
            await write(item.message)
            buffer.written(item)
            _delivered(client, item)
            if item.journal:
                observer.entries_sent(table, client_id, item.journal)

    async def _wait_for_resume_position(self, retained: SnapshotManifest | None) -> None:
        """A client resumes strictly after the position it holds: an instance that has not applied that far yet
        (it is behind the client) waits until it has, up to resume_wait, or the client would get changes it
        already applied. Then InstanceBehind (UNAVAILABLE): the client tries another instance."""
        replica = self._replica
        text = self._request.last_known_source_position or (retained.source_position if retained else "")
        try:
            position = Position.parse(text)
        except PositionError:
            return  # none given, or unparseable (_resume_after logs it)
        if position_reached(replica.applied_position, position):
            return
        timeout = replica.limits.resume_wait
        log.info("%s: client %s resumes after %s, which this instance has not applied yet (it is at %s); waiting "
                 "up to %gs", replica.table, self.client_id, position, replica.applied_position, timeout)
        if not await replica.wait_applied(position, timeout):
            raise InstanceBehind(replica.table, str(position), str(replica.applied_position or ""), timeout)

    def _plan(self, retained: SnapshotManifest | None) -> tuple[SyncPlan, SnapshotCopy | None]:
        """Choose the mode and, for a full snapshot, copy the rows at the current sequence: no await here."""
        replica, request = self._replica, self._request
        journal = replica.journal
        plan = choose_sync_mode(
            last_known_sequence=request.last_known_sequence,
            position_resume_sequence=self._resume_after(self._request.last_known_source_position, "client"),
            first_retained_sequence=journal.first_retained_sequence,
            current_sequence=journal.current_sequence,
            retained_snapshot=self._retained(retained),
            sequence_issuer=JournalIdentity(request.last_known_instance_id, request.last_known_journal_epoch),
            journal=(identity := JournalIdentity(self._instance_id, journal.epoch)),
        )
        if request.identify_instance or request.last_known_instance_id:
            plan = replace(plan, identity=identity)
        if plan.mode is not SyncMode.FULL_SNAPSHOT:
            return plan, None
        rows = replica.state.rows()  # a filter picks its rows from this copy later, off the event loop
        sequence = journal.current_sequence
        return plan, SnapshotCopy(f"fanout-{sequence}-{int(self._clock.now() * 1000)}", sequence, rows,
                                  str(replica.applied_position or ""))

    def _retained(self, manifest: SnapshotManifest | None) -> RetainedSnapshot | None:
        """The snapshot resolved by its source position, whichever instance or service wrote it."""
        if manifest is None:
            return None
        sequence = self._resume_after(manifest.source_position, f"snapshot {manifest.snapshot_id}")
        return RetainedSnapshot(manifest.snapshot_id, sequence, manifest.journal_sequence)

    def _resume_after(self, text: str, whose: str) -> int | None:
        """The journal's resume sequence for a source position (None: none given, unparseable or not covered)."""
        if not text:
            return None
        try:
            position = Position.parse(text)
        except PositionError as exc:
            log.warning("client %s: the %s source position is unparseable (%s); ignored", self.client_id, whose, exc)
            return None
        return self._replica.journal.resume_after_position(position)


def _delivered(client: ConnectedClient, item: Outgoing) -> None:
    client.delivered += item.entries
    if item.last_sequence is not None:
        client.sequence = item.last_sequence
