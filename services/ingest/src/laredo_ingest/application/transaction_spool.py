"""A Spool that keeps a streamed transaction in memory up to a limit, then in an anonymous temporary file.

So a huge streamed transaction costs disk, not memory: PostgreSQL streams it precisely because it is
bigger than logical_decoding_work_mem, and ingest must hold it until its Stream Commit. The file is
unlinked from the start (tempfile.TemporaryFile) and disappears with the process.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Iterator
from typing import IO

from laredo_ingest.domain.streamed import MemorySpool

_ENTRY_HEAD = struct.Struct("!I")
FILE_BUFFER_BYTES = 1 << 20  # entries are written and read back in large pieces


class SpillingSpool:
    """Memory until `memory_limit` bytes; from then on every message goes to the file (in order)."""

    def __init__(self, memory_limit: int, spill_dir: str | None = None) -> None:
        self._memory = MemorySpool()
        self._memory_limit = memory_limit
        self._spill_dir = spill_dir
        self._file: IO[bytes] | None = None
        self._file_first: dict[int, int] = {}  # subxid -> file offset of its first spilled message
        self._file_count = 0
        self._last_subxid = -1
        self.size_bytes = 0

    @property
    def count(self) -> int:
        return self._memory.count + self._file_count

    @property
    def spilled(self) -> bool:
        return self._file is not None

    def append(self, subxid: int, message: bytes) -> None:
        self.size_bytes += len(message)
        if self._file is None and self._memory.size_bytes + len(message) <= self._memory_limit:
            self._memory.append(subxid, message)
            return
        file = self._file or self._open_file()
        if subxid != self._last_subxid:
            self._file_first.setdefault(subxid, file.tell())
            self._last_subxid = subxid
        file.write(_ENTRY_HEAD.pack(len(message)))
        file.write(message)
        self._file_count += 1

    def rollback_to(self, subxid: int) -> None:
        if subxid in self._memory._first:  # noqa: SLF001 - the two spool halves share one bookkeeping
            if self._file is not None:
                self._truncate_file(0)  # it began in memory: everything spilled came after it
            self._memory.rollback_to(subxid)
            self.size_bytes = self._memory.size_bytes
            return
        offset = self._file_first.get(subxid)
        if offset is not None and self._file is not None:
            self._truncate_file(offset)

    def messages(self) -> Iterator[bytes]:
        yield from self._memory.messages()
        if self._file is not None:
            yield from _read_entries(self._file, self._file_count)

    def close(self) -> None:
        self._memory.close()
        if self._file is not None:
            self._file.close()
            self._file = None
        self.size_bytes = 0

    def _open_file(self) -> IO[bytes]:
        self._file = tempfile.TemporaryFile(prefix="laredo-ingest-txn-", dir=self._spill_dir,
                                            buffering=FILE_BUFFER_BYTES)
        return self._file

    def _truncate_file(self, offset: int) -> None:
        assert self._file is not None
        kept = 0
        self._file.seek(0)
        position = 0
        while position < offset:  # count the entries before the cut
            (length,) = _ENTRY_HEAD.unpack(self._file.read(4))
            position += 4 + length
            self._file.seek(position)
            kept += 1
        self._file.truncate(offset)
        self._file.seek(offset)
        self._file_count = kept
        self._file_first = {x: o for x, o in self._file_first.items() if o < offset}
        self._last_subxid = -1
        self.size_bytes = self._memory.size_bytes + offset - 4 * kept


def _read_entries(file: IO[bytes], count: int) -> Iterator[bytes]:
    end = file.tell()
    file.seek(0)
    try:
        for _ in range(count):
            (length,) = _ENTRY_HEAD.unpack(file.read(_ENTRY_HEAD.size))
            yield file.read(length)
    finally:
        file.seek(end)
