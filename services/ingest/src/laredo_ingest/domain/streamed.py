"""Streamed in-progress transactions (pgoutput protocol 2, streaming 'on'): buffer until commit or abort.

With streaming on, the server sends a large transaction in blocks (Stream Start .. Stream Stop) while it
is still running, interleaved with other transactions, and only later a Stream Commit or Stream Abort.
An aborted transaction's changes are sent too (before its abort), so nothing may go downstream before
the commit. Invariants, the same as PostgreSQL's own apply worker keeps:
- every message of a block goes to the spool of the block's top-level xid, in arrival order, Relation and
  Type messages included (they describe the tuples that follow them in that transaction);
- a subtransaction abort (Stream Abort with subxid != xid) discards the spool from the first message of
  that subtransaction on: subtransactions of one session nest, so everything after it belongs to it or to
  its children, which are aborted with it;
- a top-level abort discards the spool; a commit replays it as Begin, messages, Commit at the commit's
  LSN, so the rest of the pipeline handles it exactly like a transaction that was never streamed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from laredo_kernel.errors import ProtocolError

from laredo_ingest.domain.pgoutput import (
    Begin,
    Buffer,
    Commit,
    PgOutputMessage,
    StreamAbort,
    StreamCommit,
    StreamStart,
    decode_message,
    split_streamed,
)


class Spool(Protocol):
    """The buffered messages of one streamed transaction, in arrival order."""

    @property
    def size_bytes(self) -> int: ...

    @property
    def count(self) -> int: ...

    def append(self, subxid: int, message: bytes) -> None:
        """Add a message; the first message of each subxid is remembered for rollback_to()."""
        ...

    def rollback_to(self, subxid: int) -> None:
        """Discard the first message of subxid and everything after it (no-op for an unknown subxid)."""
        ...

    def messages(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class MemorySpool:
    """A Spool in a list: for small transactions, and the part of a big one that is not spilled."""

    def __init__(self) -> None:
        self._messages: list[bytes] = []
        self._first: dict[int, int] = {}  # subxid -> index of its first message
        self._last_subxid = -1
        self.size_bytes = 0

    @property
    def count(self) -> int:
        return len(self._messages)

    def append(self, subxid: int, message: bytes) -> None:
        if subxid != self._last_subxid:
            self._first.setdefault(subxid, len(self._messages))
            self._last_subxid = subxid
        self._messages.append(message)
        self.size_bytes += len(message)

    def rollback_to(self, subxid: int) -> None:
        index = self._first.get(subxid)
        if index is None:
            return
        self.size_bytes -= sum(len(m) for m in self._messages[index:])
        del self._messages[index:]
        self._first = {x: i for x, i in self._first.items() if i < index}
        self._last_subxid = -1

    def messages(self) -> Iterator[bytes]:
        return iter(self._messages)

    def close(self) -> None:
        self._messages, self._first, self.size_bytes = [], {}, 0


class StreamedTransactions:
    """Routes the messages of stream blocks into per-transaction spools; replays a spool at its commit."""

    def __init__(self, new_spool: Callable[[], Spool] = MemorySpool) -> None:
        self._new_spool = new_spool
        self._spools: dict[int, Spool] = {}
        self._block_xid: int | None = None

    @property
    def in_block(self) -> bool:
        return self._block_xid is not None

    @property
    def open_transactions(self) -> int:
        return len(self._spools)

    @property
    def buffered_bytes(self) -> int:
        return sum(s.size_bytes for s in self._spools.values())

    def start(self, message: StreamStart) -> None:
        if self._block_xid is not None:
            raise ProtocolError(f"Stream Start of xid {message.xid} inside the block of xid {self._block_xid}")
        self._block_xid = message.xid
        if message.xid not in self._spools:
            self._spools[message.xid] = self._new_spool()

    def stop(self) -> None:
        if self._block_xid is None:
            raise ProtocolError("Stream Stop without a Stream Start")
        self._block_xid = None

    def add(self, buf: Buffer, offset: int) -> None:
        """A message inside the current block (anything but Stream Stop)."""
        subxid, message = split_streamed(buf, offset)
        self._spools[self._block_xid].append(subxid or self._block_xid, message)  # type: ignore[index]

    def abort(self, message: StreamAbort) -> None:
        self._require_outside_block("Stream Abort")
        spool = self._spools.get(message.xid)
        if spool is None:
            return  # nothing of it was streamed in this session (it began before our start position)
        if message.subxid == message.xid:
            del self._spools[message.xid]
            spool.close()
        else:
            spool.rollback_to(message.subxid)

    def commit(self, message: StreamCommit) -> Iterator[PgOutputMessage]:
        """The transaction as if it had not been streamed: Begin, its surviving messages, Commit."""
        self._require_outside_block("Stream Commit")
        spool = self._spools.pop(message.xid, None)
        yield Begin(message.commit_lsn, message.commit_time_pg_us, message.xid)
        if spool is not None:
            try:
                for data in spool.messages():
                    yield decode_message(data)
            finally:
                spool.close()
        yield Commit(message.flags, message.commit_lsn, message.end_lsn, message.commit_time_pg_us)

    def close(self) -> None:
        for spool in self._spools.values():
            spool.close()
        self._spools.clear()
        self._block_xid = None

    def _require_outside_block(self, what: str) -> None:
        if self._block_xid is not None:
            raise ProtocolError(f"{what} inside the stream block of xid {self._block_xid}")
