"""The client's copy of the table: indexed rows, how far they got (the cursor), and change listeners.

Invariants:
- changes are applied by primary key, so applying one twice is harmless;
- `cursor.source_position` is the highest source position applied (the watermark), and every change at or
  below it is in the rows; a change at or below it is skipped, so two overlapping streams (a failover handoff)
  merge strictly by position: each change is applied once and a lagging stream never rolls a row back.
  Positions that do not parse as source positions are never compared: such changes are always applied
  (at-least-once);
- while streams overlap (`shared()`), a full snapshot behind the watermark is not installed over the rows (that
  would move the watermark back while the other stream carries on past changes the snapshot lacks): its stream
  applies it in a shadow copy until the copy reaches the watermark, or until it is the only stream left;
- listeners fire once per applied change, after the rows changed, with the row as held before and after."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import Action
from laredo_kernel.position import Position, PositionError, parse_lsn

from laredo_client.indexed_state import IndexedRows, Key, Row
from laredo_client.values import Column, primary_key_of

log = logging.getLogger(__name__)

#: Called with (old, new): insert (None, new), update (old, new), delete (old, None), truncate (None, None).
Listener = Callable[[Row | None, Row | None], None]
#: A parsed source position as a plain tuple: compares fast, and None when the text is no source position.
PositionKey = tuple[int, int, int]  # Position.key: (epoch and LSN, ordinal, repair)
_PARSE: Any = object()  # apply_change's default: parse the position text


@dataclass
class Cursor:
    """How far the rows got. `sequence` is only meaningful to the journal that issued it: the server instance
    `server_id` names, in its journal epoch `journal_epoch` (both from the handshake; empty: unknown)."""

    sequence: int = 0
    source_position: str = ""
    snapshot_id: str = ""
    server_id: str = ""
    journal_epoch: str = ""

    def issued(self, sequence: int, server_id: str, journal_epoch: str) -> None:
        """The rows hold every entry up to `sequence` of that instance's journal epoch."""
        self.sequence, self.server_id, self.journal_epoch = sequence, server_id, journal_epoch

    def forget_sequence(self) -> None:
        self.issued(0, "", "")

    @property
    def resumable_sequence(self) -> bool:
        """Whether a server can tell that `sequence` is its own: resume by it is then exact."""
        return self.sequence > 0 and bool(self.server_id and self.journal_epoch)


def position_key(text: str) -> PositionKey | None:
    """Position.key of a source position text, or None when it is none. Streamed changes ('X/Y:N', the
    changes of a transaction sharing X/Y) take a short path; anything else goes through Position.parse."""
    if not text:
        return None
    lsn_text, colon, ordinal = text.partition(":")
    if colon and ordinal.isdigit():
        lsn = _lsn(lsn_text)
        if lsn is not None:
            return lsn, int(ordinal), 0
    try:
        parsed = Position.parse(text)
    except PositionError:
        return None
    return parsed.key


@functools.lru_cache(maxsize=256)
def _lsn(text: str) -> int | None:
    try:
        return parse_lsn(text)
    except PositionError:
        return None


class ClientReplica:
    def __init__(self, lookup_fields: Sequence[str] = (), indexes: Iterable[object] = ()) -> None:
        self.rows = IndexedRows(lookup_fields, indexes)
        self.cursor = Cursor()
        self.columns: tuple[Column, ...] = ()
        self.initialized = False  # holds a consistent state: a snapshot was installed or restored
        self._listeners: list[Listener] = []
        self._locked = False  # inside batch(), holding the rows' lock
        self.watermark: PositionKey | None = None  # the applied position, parsed; read-only outside
        self._streams: dict[object, Callable[[], None]] = {}  # streams applying to the rows -> on_alone

    # -- streams ----------------------------------------------------------------------------------------------

    def attach(self, stream: object, on_alone: Callable[[], None]) -> None:
        """A stream starts applying to the rows; `on_alone` is called when the others have detached."""
        self._streams[stream] = on_alone

    def detach(self, stream: object) -> None:
        """A stream is gone (ended, failed or closed); a stream left alone hears so (idempotent)."""
        if self._streams.pop(stream, None) is not None and len(self._streams) == 1:
            for on_alone in list(self._streams.values()):
                on_alone()

    def shared(self) -> bool:
        """Whether several streams apply to the rows right now (a handoff overlap)."""
        return len(self._streams) > 1

    # -- listeners ------------------------------------------------------------------------------------------

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns a function that removes it (calling it twice is harmless)."""
        with self.rows.lock:  # not in the middle of a batch applied under the lock (see batch())
            self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _notify(self, old: Row | None, new: Row | None) -> None:
        if not self._listeners:
            return
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:  # noqa: BLE001 - one faulty listener must not stop replication
                log.exception("a change listener raised; the change is applied and replication goes on")

    # -- schema and cursor ------------------------------------------------------------------------------------

    def set_columns(self, columns: Sequence[Column]) -> None:
        if not columns:
            return
        self.columns = tuple(columns)
        self.rows.set_key_columns(primary_key_of(columns))

    def set_position(self, text: str) -> None:
        self.cursor.source_position = text
        self.watermark = position_key(text)

    def already_applied(self, position: str | PositionKey | None) -> bool:
        """True when a change at `position` is at or below the watermark, i.e. already in the rows."""
        key = position_key(position) if isinstance(position, str) else position
        return key is not None and self.watermark is not None and key <= self.watermark

    # -- changes ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Apply the changes made within under one acquisition of the rows' lock when nobody listens (readers on
        other threads wait for the whole batch). With listeners, each change takes the lock on its own and they
        are called outside it: a listener may wait for a thread that reads the rows."""
        if self._listeners:
            yield
            return
        with self.rows.lock:
            self._locked = True
            try:
                yield
            finally:
                self._locked = False

    def apply_change(self, action: Action, old: Row | None, new: Row | None, position: str,
                     key: PositionKey | None = _PARSE) -> None:
        """Apply one journal entry (the caller checked already_applied) and advance the watermark to its
        position (`key`: the position already parsed by the caller)."""
        if key is _PARSE:
            key = position_key(position)
        if action is Action.TRUNCATE:
            self.rows.replace_all(())
            self._advance(position, key)
            self._notify(None, None)
            return
        if action is Action.DELETE:
            rows, removed = self.rows, None
            if old is not None:
                removed = rows.pop(rows.key_of(old)) if self._locked else rows.remove(rows.key_of(old))
            self._advance(position, key)
            if removed is not None:
                self._notify(removed, None)
            return
        if new is None:
            log.warning("%s change without new values at %s ignored", action.value, position or "?")
            return
        rows = self.rows
        pk = rows.key_of(new)
        replacing = self._old_key(old, pk) if old is not None else None
        previous = rows.put(new, pk, replacing) if self._locked else rows.upsert(new, replacing=replacing, pk=pk)
        if position:
            self.cursor.source_position, self.watermark = position, key
        if self._listeners:
            self._notify(previous, new)

    def _old_key(self, old: Row, new_key: Key) -> Key | None:
        """The key the row had before, when the change carries its old key columns (a key update)."""
        rows = self.rows
        for column in rows.key_columns:
            if column not in old:
                return None
        key = rows.key_of(old)
        return key if key != new_key else None

    def _advance(self, position: str, key: PositionKey | None) -> None:
        if position:
            self.cursor.source_position = position
            self.watermark = key

    def install_snapshot(self, rows: Iterable[Row], *, position: str, snapshot_id: str) -> None:
        """Replace every row with a full snapshot. When the client already held rows (a re-sync), listeners
        hear the difference as inserts, updates and deletes, so they never miss a change a re-sync brings."""
        before = self.rows.replace_all(rows)
        self.set_position(position)
        self.cursor.snapshot_id = snapshot_id
        had_state, self.initialized = self.initialized, True
        if not had_state or not self._listeners:
            return
        after = dict(self.rows.items())
        for key, row in after.items():
            old = before.get(key)
            if old != row:
                self._notify(old, row)
        for key, row in before.items():
            if key not in after:
                self._notify(row, None)

    def restore(self, rows: Iterable[Row], columns: Sequence[Column], cursor: Cursor) -> None:
        """Load a saved local snapshot (before any stream)."""
        self.set_columns(columns)
        self.rows.replace_all(rows)
        self.cursor = Cursor(cursor.sequence, "", cursor.snapshot_id, cursor.server_id, cursor.journal_epoch)
        self.set_position(cursor.source_position)
        self.initialized = True
