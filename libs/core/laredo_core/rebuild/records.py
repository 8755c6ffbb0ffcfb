"""What OAM and the instances exchange about rebuilds: command arguments, progress reports and outcome records.

A rebuild (an OAM RestoreSnapshot or StartReplay) has an id (`restore-<hex>` or `replay-<hex>`) chosen by OAM.
OAM sends each fan-out or query instance that serves the table a RESTORE or REPLAY command with
RebuildRequest.to_args(); the instance answers once it has started, reports progress under
`replays[<id>]` of its heartbeat status (RebuildReport.to_json()), and when the rebuild ends stores its final
report as the result of the record id `outcome_id(<id>, <service>, <instance>)`. OAM stores its own record
(which instances it asked) as the result of the record id `<id>`. Command results live `result_ttl` (an
hour by default): the coordination store keeps them without any further key of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.rebuild.pacing import ReplaySpeed


class RebuildKind(enum.Enum):
    RESTORE = "restore"
    REPLAY = "replay"


class RebuildState(enum.Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    ERROR = "error"
    STOPPED = "stopped"

    @property
    def finished(self) -> bool:
        return self is not RebuildState.RUNNING


class RebuildPhase(enum.Enum):
    """Where a running rebuild is: each instance goes through them in this order."""

    WAITING = "waiting"  # for the live table to apply up to the snapshot's stream sequence
    LOADING = "loading"  # the snapshot's rows into the private copy
    TAIL = "tail"  # the stream tail after the snapshot, paced by the requested speed
    CATCHING_UP = "catching_up"  # the changes the live table applied meanwhile, at full speed
    INSTALLING = "installing"  # the differences into the live table (cannot be stopped any more)
    DONE = "done"


def outcome_id(rebuild_id: str, service: str, instance_id: str) -> str:
    """The record id under which an instance stores the final report of its part of a rebuild."""
    return f"{rebuild_id}@{service}:{instance_id}"


@dataclass(frozen=True, slots=True)
class RebuildRequest:
    """The arguments of a RESTORE or REPLAY command."""

    rebuild_id: str
    kind: RebuildKind
    snapshot_id: str
    table: TableId
    speed: ReplaySpeed = field(default_factory=ReplaySpeed.full)
    skip_meta_check: bool = False

    def to_args(self) -> dict[str, Any]:
        return {"rebuild_id": self.rebuild_id, "snapshot_id": self.snapshot_id, "schema": self.table.schema,
                "table": self.table.name, "speed": self.speed.text, "skip_meta_check": self.skip_meta_check}

    @classmethod
    def from_args(cls, kind: RebuildKind, args: Mapping[str, Any]) -> RebuildRequest:
        """Raises ValueError naming the missing or malformed argument."""
        missing = [k for k in ("rebuild_id", "snapshot_id", "schema", "table") if not args.get(k)]
        if missing:
            raise ValueError(f"{kind.value} command lacks {', '.join(missing)}; OAM sends every one of them")
        return cls(str(args["rebuild_id"]), kind, str(args["snapshot_id"]),
                   TableId(str(args["schema"]), str(args["table"])), ReplaySpeed.parse(str(args.get("speed") or "full")),
                   bool(args.get("skip_meta_check", False)))


@dataclass(frozen=True, slots=True)
class RebuildReport:
    """One instance's view of one rebuild: what its heartbeat carries under `replays[<id>]`."""

    rebuild_id: str
    kind: RebuildKind
    table: TableId
    snapshot_id: str
    state: RebuildState
    phase: RebuildPhase
    rows_replayed: int
    changes: int  # differences the install made to the live table (journal entries, subscriber events)
    started_unix_ms: int
    finished_unix_ms: int = 0
    speed: str = "full"
    message: str = ""
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "table": str(self.table), "snapshot_id": self.snapshot_id,
                "state": self.state.value, "phase": self.phase.value, "rows_replayed": self.rows_replayed,
                "changes": self.changes, "started_unix_ms": self.started_unix_ms,
                "finished_unix_ms": self.finished_unix_ms, "speed": self.speed, "message": self.message,
                "warnings": list(self.warnings)}

    @classmethod
    def from_json(cls, rebuild_id: str, data: Mapping[str, Any]) -> RebuildReport:
        """Raises ValueError (or KeyError) for a malformed report."""
        return cls(rebuild_id, RebuildKind(data["kind"]), TableId.parse(str(data["table"])),
                   str(data.get("snapshot_id", "")), RebuildState(data["state"]),
                   RebuildPhase(data.get("phase", RebuildPhase.DONE.value)), int(data.get("rows_replayed", 0)),
                   int(data.get("changes", 0)), int(data.get("started_unix_ms", 0)),
                   int(data.get("finished_unix_ms", 0)), str(data.get("speed", "full")),
                   str(data.get("message", "")), tuple(str(w) for w in data.get("warnings") or ()))
