"""What subscribers receive: one applied change to one row, as the table saw it."""

from __future__ import annotations

from dataclasses import dataclass, field

from laredo_kernel.changes import Action
from laredo_kernel.position import Position

from laredo_query.domain.row_store import StoredRow


@dataclass(slots=True, eq=False)
class ChangeEvent:
    """One change applied to a table: the row before (UPDATE, DELETE) and after (INSERT, UPDATE); TRUNCATE has
    neither. `commit_time_unix_us` is the source commit time (0 when unknown, e.g. baseline rows). `wire` caches
    the serialized event, built once and shared by every subscriber."""

    action: Action
    position: Position | None
    xid: int
    commit_time_unix_us: int
    old: StoredRow | None
    new: StoredRow | None
    wire: bytes | None = field(default=None, init=False)

    def __repr__(self) -> str:
        return f"ChangeEvent({self.action.value}, {self.position}, old={self.old!r}, new={self.new!r})"
