"""What the fan-out core needs from the outside world: one Protocol per role, each with its contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from laredo_kernel.changes import Action, ColumnInfo, TableId
# The change feed port is shared with other services (contract: laredo_core.stream.feed.ChangeFeed);
# the feed delivers JSON-compatible values here (json_values=True).
from laredo_core.stream.feed import ChangeFeed as ChangeFeed
from laredo_core.stream.feed import ChangeSink as ChangeSink
from laredo_core.stream.feed import FeedMessage as FeedMessage
from laredo_core.stream.feed import FeedSubscription as FeedSubscription
# Snapshot stores are shared too (contract: laredo_core.snapshots.store.SnapshotStore).
from laredo_core.snapshots.store import SnapshotStore as SnapshotStore

from laredo_fanout.domain.journal import EntryRows, JournalEntry
from laredo_fanout.domain.sync_plan import SyncPlan
from laredo_fanout.domain.table_state import StoredRow


class SyncEncoder(Protocol):
    """Builds the bytes of Sync stream messages (SyncResponse) so they are serialized once and shared. Pure CPU,
    no I/O: the protobuf implementation is used in tests too (it is its own fake). Every method returns the bytes
    of one complete SyncResponse message, except encode_row, whose result is cached on each StoredRow and reused
    by snapshot and journal messages."""

    def encode_row(self, values: Mapping[str, Any]) -> bytes: ...

    def decode_row(self, encoded: bytes) -> dict[str, Any]:
        """The values encode_row made `encoded` from (whole numbers as ints)."""

    def journal_entry(self, *, sequence: int, position: str, commit_time_unix_us: int, xid: int,
                      action: Action, old: StoredRow | None, new: StoredRow | None) -> bytes: ...

    def entry_rows(self, encoded: bytes) -> EntryRows:
        """A journal_entry message's action and its rows' values (for subscription filters)."""

    def entry_as(self, encoded: bytes, action: Action) -> bytes:
        """The journal_entry message as an INSERT of its new row or a DELETE of its old one (a row that entered
        or left a client's filter); sequence, position, time and xid unchanged."""

    def journal_entries(self, entries: Sequence[JournalEntry]) -> bytes:
        """One entry as journal_entry; several packed as one journal_batch (opt-in extension)."""

    def snapshot_rows(self, rows: Sequence[StoredRow]) -> bytes:
        """One row as snapshot_row; several packed as one snapshot_rows batch (opt-in extension)."""

    def handshake(self, plan: SyncPlan, *, current_sequence: int, oldest_sequence: int,
                  columns: Sequence[ColumnInfo]) -> bytes: ...

    def snapshot_begin(self, *, snapshot_id: str, sequence: int, row_count: int, position: str) -> bytes: ...

    def snapshot_end(self, *, sequence: int, rows_sent: int, position: str) -> bytes: ...

    def heartbeat(self, *, current_sequence: int, server_time: float) -> bytes: ...

    def schema_change(self, *, sequence: int, old_columns: Sequence[ColumnInfo],
                      new_columns: Sequence[ColumnInfo]) -> bytes: ...

    def go_away(self, *, reason: str, drain_deadline_unix_ms: int) -> bytes: ...

    def fetch_begin(self, *, snapshot_id: str, sequence: int, row_count: int, position: str) -> bytes:
        """FetchSnapshotResponse messages (FetchSnapshot): begin, one per row, end."""

    def fetch_row(self, row: StoredRow) -> bytes: ...

    def fetch_end(self, *, sequence: int, rows_sent: int, position: str) -> bytes: ...


class Clock(Protocol):
    """Wall-clock time in Unix seconds (journal ages, timestamps); monotonic time comes from the loop."""

    def now(self) -> float: ...


class Observer(Protocol):
    """Traces and metrics of the fan-out core; never raises into it. applying() wraps the application of one
    stream message and yields an opaque trace reference that is kept with every journal entry the message
    produced; entries_sent() reports entries written to one client, so their send is traced as a child of it."""

    def applying(self, message: FeedMessage) -> AbstractContextManager[object | None]: ...

    def entries_sent(self, table: TableId, client_id: str, entries: Sequence[JournalEntry]) -> None: ...
