"""Why a baseline is taken: the cause operators see in the status, and the record of each table's last one."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class BaselineCause(enum.Enum):
    """What made ingest take a (re-)baseline; the value is what the status and OAM show."""

    INITIAL = "initial"  # nothing to resume from: the first start, or the ingest state was deleted
    SLOT_DROPPED = "slot dropped"  # the slot of a completed baseline is gone: changes may be missing
    SLOT_INVALIDATED = "slot invalidated"  # wal_status lost: the WAL the slot needed is gone
    SLOT_UNUSABLE = "slot unusable"  # the slot is not a permanent pgoutput slot of this database
    SLOT_CHANGED = "slot changed"  # the recorded baseline belongs to another slot (slot_name changed)
    SERVER_CHANGED = "server changed"  # the recorded baseline was taken on another server
    PREVIOUS_INCOMPLETE = "previous baseline incomplete"
    TABLES_CHANGED = "tables changed"  # the configured tables (column lists, row filters) changed
    EPHEMERAL_SLOT = "ephemeral slot"  # slot_mode = ephemeral baselines every start
    ALWAYS_BASELINE = "always_baseline"
    OPERATOR_RESET = "operator reset"  # RESET: the slot was dropped and recreated on request
    OPERATOR_RELOAD = "operator reload"  # RELOAD of some tables
    SCHEMA_CHANGE = "schema change"  # a table's columns changed (rebaseline_on_schema_change)
    UNFINISHED_RELOAD = "unfinished reload"  # a RELOAD an earlier session did not finish, redone
    STREAM_GAP = "stream gap"  # the stream holds a change ahead of an earlier one that was lost
    SOURCE_REWOUND = "source WAL behind stream"  # failover to a lagging standby, a restore, a new database


@dataclass(frozen=True, slots=True)
class BaselineReason:
    cause: BaselineCause
    detail: str = ""  # the specifics, e.g. which slot was dropped

    def __str__(self) -> str:
        return f"{self.cause.value}: {self.detail}" if self.detail else self.cause.value


@dataclass(frozen=True, slots=True)
class TableBaseline:
    """The last baseline of one table: why, which one and when it started (kept in the ingest state)."""

    table: str  # schema.table
    cause: BaselineCause
    detail: str
    baseline_id: str
    started_unix_ms: int

    def report(self) -> dict[str, Any]:
        """As the status heartbeat (and the ingest state) carries it."""
        return {"cause": self.cause.value, "detail": self.detail, "baseline_id": self.baseline_id,
                "started_unix_ms": self.started_unix_ms}

    @classmethod
    def from_report(cls, table: str, report: Mapping[str, Any]) -> TableBaseline:
        """The inverse of report(); an unknown cause (written by a newer version) reads as INITIAL."""
        causes = {c.value: c for c in BaselineCause}
        return cls(table, causes.get(str(report.get("cause", "")), BaselineCause.INITIAL),
                   str(report.get("detail", "")), str(report.get("baseline_id", "")),
                   int(report.get("started_unix_ms", 0) or 0))
