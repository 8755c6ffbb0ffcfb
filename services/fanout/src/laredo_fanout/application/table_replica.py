"""One fan-out target at run time: rows, journal, readiness, change wake-ups, schema changes and drain."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.deadletters.key_watch import KeyWatch
from laredo_kernel.position import ZERO, Position
from laredo_kernel.table_replay import AppliedCounts

from laredo_fanout.application.client_registry import ClientRegistry
from laredo_fanout.domain.client_buffer import BufferLimits
from laredo_fanout.domain.journal import EntryRows, Journal, JournalEntry, position_reached
from laredo_core.snapshots.format import SnapshotManifest
from laredo_fanout.domain.table_state import RowEffect, TableState
from laredo_fanout.ports import SyncEncoder

_SCHEMA_CHANGES_KEPT = 64
#: Entries whose rows were read lately: the filtered clients of a table read each new entry in turn.
_ENTRIES_READ = 1024
#: Journal messages kept for the next client reading the same entries (see journal_message()).
_MESSAGES_KEPT = 64
#: Seconds between the wake-ups of sessions whose clients are still taking earlier messages (see grew()).
BACKLOG_CHECK_INTERVAL = 0.1


@dataclass(frozen=True, slots=True)
class ReplicaLimits:
    journal_max_entries: int
    journal_max_age: float  # seconds; 0 = no age limit
    heartbeat_interval: float
    max_clients: int  # 0 = unlimited
    buffer: BufferLimits = field(default_factory=BufferLimits)
    resume_wait: float = 10.0  # seconds a client resuming at a position not applied here yet waits for it


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """The columns changed after journal entry `after_sequence`; `message` is the encoded notification."""

    index: int
    after_sequence: int
    message: bytes


@dataclass(frozen=True, slots=True)
class DrainNotice:
    """Why and until when drained streams are served (deadline 0 = until clients leave)."""

    reason: str
    deadline_unix_ms: int


class TableReplica:
    """Ready once the table's baseline is complete and the feed has caught up with the stream.

    Sessions wait on `appended()` instead of polling: the replicator calls notify_appended() after every message that
    added journal entries (or a schema change), which wakes every waiting session at once; a drain wakes them the same
    way. A session whose client is still taking earlier messages waits on `grew()` instead, which appends resolve at
    most every BACKLOG_CHECK_INTERVAL: it only checks its client's lag then, and a hundred such sessions woken for
    every entry would take the CPU the clients' messages need."""

    def __init__(self, source_id: str, table: TableId, limits: ReplicaLimits, encoder: SyncEncoder) -> None:
        self.source_id = source_id
        self.table = table
        self.limits = limits
        self.state = TableState((), encoder.encode_row, encoder.decode_row)
        self._entry_rows = encoder.entry_rows
        self._encoder = encoder
        self._messages: dict[tuple[JournalEntry, JournalEntry], bytes] = {}
        self._entries_read: dict[JournalEntry, EntryRows] = {}
        self.journal = Journal(limits.journal_max_entries, limits.journal_max_age)
        self.clients = ClientRegistry(limits.max_clients)
        self.columns: tuple[ColumnInfo, ...] = ()
        self._applied_position: Position | None = None  # the last stream change applied, or the last repair after it
        self._position_waiters: list[tuple[Position, asyncio.Future[None]]] = []
        self.watch = KeyWatch()  # rows changed after a rejected change (dead-letter replays skip what was overtaken)
        self.stream_sequence = 0  # JetStream sequence of the last message applied (or skipped as a replay)
        self.dead_letters = 0  # changes (or messages) of the stream this instance could not apply
        self.applied = AppliedCounts()  # changes of transactions applied since this instance started
        self.baseline_complete = False
        self.position_regressions = 0  # messages at or before the applied position (see PositionRegressions)
        self.caught_up = False
        self.schema_changes: list[SchemaChange] = []
        self.drain: DrainNotice | None = None
        self.drain_ended = asyncio.Event()  # the drain deadline passed: drained streams end
        self.latest_snapshot: SnapshotManifest | None = None
        self._schema_change_count = 0
        self._ready = asyncio.Event()
        self._appended: asyncio.Future[None] | None = None
        self._grew: asyncio.Future[None] | None = None
        self._grew_timer: asyncio.TimerHandle | None = None

    @property
    def applied_position(self) -> Position | None:
        """Every change of the stream up to here is applied (None: nothing yet)."""
        return self._applied_position

    @applied_position.setter
    def applied_position(self, position: Position | None) -> None:
        self._applied_position = position
        if self._position_waiters:
            for wanted, future in self._position_waiters:
                if not future.done() and position_reached(position, wanted):
                    future.set_result(None)

    async def wait_applied(self, position: Position, timeout: float) -> bool:
        """Wait up to `timeout` seconds until every change up to `position` is applied; False if it was not."""
        if position_reached(self._applied_position, position):
            return True
        if timeout <= 0:
            return False
        waiter = (position, asyncio.get_running_loop().create_future())
        self._position_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter[1]
            return True
        except TimeoutError:
            return False
        finally:
            self._position_waiters.remove(waiter)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    def mark_baseline_complete(self) -> None:
        self.baseline_complete = True
        self._update_ready()

    def mark_caught_up(self) -> None:
        self.caught_up = True
        self._update_ready()

    def appended(self) -> asyncio.Future[None]:
        """Resolved by the next notify_appended(); take it before checking the journal. Shared by every session:
        wait for it with asyncio.wait() (which never cancels it), not `await`."""
        if self._appended is None:
            self._appended = asyncio.get_running_loop().create_future()
        return self._appended

    def grew(self) -> asyncio.Future[None]:
        """Resolved within BACKLOG_CHECK_INTERVAL of the next notify_appended() (at once by an urgent one); shared
        like appended()."""
        if self._grew is None:
            self._grew = asyncio.get_running_loop().create_future()
        return self._grew

    def notify_appended(self, *, urgent: bool = False) -> None:
        future, self._appended = self._appended, None
        if future is not None and not future.done():
            future.set_result(None)
        if self._grew is None:
            return
        if urgent:
            self._resolve_grew()
        elif self._grew_timer is None:
            self._grew_timer = asyncio.get_running_loop().call_later(BACKLOG_CHECK_INTERVAL, self._resolve_grew)

    def _resolve_grew(self) -> None:
        if self._grew_timer is not None:
            self._grew_timer.cancel()
            self._grew_timer = None
        future, self._grew = self._grew, None
        if future is not None and not future.done():
            future.set_result(None)

    def journal_message(self, entries: Sequence[JournalEntry]) -> bytes:
        """The message of `entries`, consecutive entries of the journal (as read from it), built once for every
        client that reads the same ones: clients keeping up read the same new entries, and catching-up clients
        read in chunks that end on multiples of their batch size (see SessionProducer._next)."""
        if len(entries) == 1:
            return entries[0].encoded  # an entry is its own message
        key = (entries[0], entries[-1])  # entries compare by identity: the ends name the whole run
        message = self._messages.get(key)
        if message is None:
            if len(self._messages) >= _MESSAGES_KEPT:
                self._messages.clear()
            message = self._messages[key] = self._encoder.journal_entries(entries)
        return message

    def read_entry(self, entry: JournalEntry) -> EntryRows:
        """The action of `entry` and its rows' values, read from its message (shared: never modify them)."""
        rows = self._entries_read.get(entry)
        if rows is None:
            if len(self._entries_read) >= _ENTRIES_READ:
                self._entries_read.clear()
            rows = self._entries_read[entry] = self._entry_rows(entry.encoded)
        return rows

    def next_repair_position(self) -> Position:
        """The position of a change this instance makes without a stream change of its own (RestoreSnapshot,
        StartReplay, a dead-letter replay): after the last stream change applied and the repairs since, before
        any later stream change. A client resuming after the stream change gets it; one that applied it does
        not get it again. It becomes the applied position, so snapshots and full syncs include it."""
        self.applied_position = position = (self.applied_position or ZERO).next_repair()
        return position

    def note_schema_change(self, message: bytes) -> None:
        """Columns changed after the current journal entry; sessions send `message` in order."""
        self._schema_change_count += 1
        self.schema_changes.append(SchemaChange(self._schema_change_count, self.journal.current_sequence, message))
        del self.schema_changes[:-_SCHEMA_CHANGES_KEPT]

    def start_drain(self, notice: DrainNotice, seconds_left: float | None) -> bool:
        """Tell sessions to send GoAway; end drained streams after `seconds_left` (None: never). Idempotent: a
        second drain keeps the first notice. Returns whether this call started it."""
        if self.drain is not None:
            return False
        self.drain = notice
        if seconds_left is not None:
            asyncio.get_running_loop().call_later(max(0.0, seconds_left), self.drain_ended.set)
        self.notify_appended(urgent=True)
        return True

    def restore(self, manifest: SnapshotManifest, rows: Iterable[dict[str, Any]]) -> None:
        """Start from a snapshot: its rows, columns and position; the journal continues after its sequence."""
        self.state.restore_rows(manifest.key_columns, rows)
        self.restored(manifest)

    def restored(self, manifest: SnapshotManifest) -> None:
        """The state already holds the snapshot's rows (restored in a thread): adopt the rest of it."""
        self.columns = manifest.columns
        position = Position.parse(manifest.source_position)
        self.journal.continue_after(manifest.journal_sequence, position)
        self.applied_position = self.state.restored_position = position
        self.stream_sequence = manifest.stream_sequence
        self.latest_snapshot = manifest
        self.mark_baseline_complete()

    def _update_ready(self) -> None:
        if self.baseline_complete and self.caught_up:
            self._ready.set()


def journal_effect(replica: TableReplica, effect: RowEffect, position: Position, encoder: SyncEncoder, now: float,
                   xid: int = 0, commit_time_unix_us: int = 0, trace: object | None = None) -> None:
    """Append `effect` to the replica's journal with the next sequence at `position` (a stream change's, or
    next_repair_position() for a change of this instance's own); a commit time of 0 is `now`."""
    journal = replica.journal
    sequence = journal.next_sequence
    encoded = encoder.journal_entry(sequence=sequence, position=str(position),
                                    commit_time_unix_us=commit_time_unix_us or int(now * 1_000_000), xid=xid,
                                    action=effect.action, old=effect.old, new=effect.new)
    journal.append(JournalEntry(sequence, position, encoded, now, trace), now)
