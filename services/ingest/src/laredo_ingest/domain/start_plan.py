"""Whether a start resumes streaming from the slot or takes a new baseline: a pure decision, table-tested."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from laredo_kernel.changes import TableId
from laredo_kernel.position import format_lsn

from laredo_ingest.domain.baseline_reason import BaselineCause, BaselineReason, TableBaseline


class SlotMode(enum.Enum):
    STATEFUL = "stateful"  # permanent slot, resume at confirmed_flush_lsn
    EPHEMERAL = "ephemeral"  # temporary slot, baseline on every start


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """A row of pg_replication_slots."""

    name: str
    plugin: str
    database: str
    temporary: bool
    active: bool
    confirmed_flush_lsn: int
    wal_status: str = ""  # reserved, extended, unreserved, lost
    safe_wal_size: int | None = None  # bytes of WAL before max_slot_wal_keep_size invalidates it


@dataclass(frozen=True, slots=True)
class IngestState:
    """What ingest remembers between runs (one record per source), kept in the state store.

    baseline_complete is written only after JetStream acknowledged every baseline message; it is
    written False before a slot is (re)created, so a crash at any point of a baseline re-baselines.
    """

    slot_name: str
    system_identifier: str
    baseline_lsn: int
    baseline_complete: bool
    tables: tuple[str, ...]  # sorted table fingerprints (name, column list, row filter)
    baseline_id: str = ""
    #: Tables whose on-demand re-baseline was requested and has not completed ("schema.table").
    reload_tables: tuple[str, ...] = ()
    #: An operator paused reading the slot; a restart (or another instance) stays paused.
    paused: bool = False
    #: The source's WAL epoch (laredo_kernel.position.Position.epoch) of the stream's messages.
    epoch: int = 0
    #: Each table's last completed baseline: why it was taken (the status shows it after a restart too).
    baselines: tuple[TableBaseline, ...] = ()

    @staticmethod
    def table_names(tables: Iterable[TableId | str]) -> tuple[str, ...]:
        return tuple(sorted(str(t) for t in tables))


@dataclass(frozen=True, slots=True)
class StreamTail:
    """The stream's last message when a session starts: the furthest position a consumer may hold."""

    sequence: int
    epoch: int
    commit_lsn: int  # its transaction's commit LSN, or its baseline's snapshot LSN
    #: Non-empty when the stream holds a change of ingest's ahead of an earlier one that was lost (a message
    #: ingest did not publish took its place): the slot cannot repair that, a new baseline must replace it.
    disorder: str = ""


def current_epoch(state: IngestState | None, tail: StreamTail | None) -> int:
    """The epoch ingest publishes in: the later of what it stored and what the stream holds."""
    return max(state.epoch if state is not None else 0, tail.epoch if tail is not None else 0)


def wal_behind_stream(tail: StreamTail | None, epoch: int, wal_lsn: int) -> str:
    """Why the source's WAL is behind positions the stream already holds ("" when it is not): it started
    again lower (a failover to a lagging standby, a point-in-time or file-system restore, a re-created
    database), so the slot cannot be trusted to continue where the stream stopped."""
    if tail is None or tail.epoch < epoch or wal_lsn > tail.commit_lsn:
        return ""
    return (f"the source's WAL is at {format_lsn(wal_lsn)}, at or before {format_lsn(tail.commit_lsn)} that the "
            f"stream already holds (message {tail.sequence}): the source's WAL started again lower (failover to "
            "a lagging standby, a restore or a re-created database)")


def epoch_for_baseline(epoch: int, tail: StreamTail | None, snapshot_lsn: int) -> int:
    """The epoch of a baseline taken at snapshot_lsn: the next one when the stream already holds a position at
    or after it, so that consumers apply it instead of skipping it as a replay."""
    return epoch + 1 if wal_behind_stream(tail, epoch, snapshot_lsn) else epoch


class StartKind(enum.Enum):
    RESUME = "resume"
    BASELINE = "baseline"


@dataclass(frozen=True, slots=True)
class StartPlan:
    kind: StartKind
    drop_existing_slot: bool
    reason: str
    #: Non-empty when changes were lost (the slot of a completed baseline is gone or invalidated):
    #: downstream is told (RESYNC_REQUIRED) before the new baseline.
    resync_reason: str = ""
    #: Why a baseline is taken (None when resuming).
    cause: BaselineCause | None = None

    @property
    def baseline_reason(self) -> BaselineReason:
        """The cause with its detail, for the status (only meaningful for a BASELINE plan)."""
        return BaselineReason(self.cause or BaselineCause.INITIAL, self.resync_reason or self.reason)


def plan_start(*, mode: SlotMode, slot_name: str, database: str, slot: SlotInfo | None,
               state: IngestState | None, system_identifier: str, tables: Iterable[TableId | str],
               always_baseline: bool) -> StartPlan:
    """Resume only when the slot exists and the state proves a baseline for exactly this slot, server
    and table set completed; otherwise (re)create the slot and baseline."""
    drop = slot is not None
    if mode is SlotMode.EPHEMERAL:
        return StartPlan(StartKind.BASELINE, drop, "ephemeral slot mode takes a baseline on every start",
                         cause=BaselineCause.EPHEMERAL_SLOT)
    if always_baseline:
        return StartPlan(StartKind.BASELINE, drop, "always_baseline is set", cause=BaselineCause.ALWAYS_BASELINE)
    if slot is None:
        reason = f"replication slot {slot_name} does not exist"
        problem = _state_problem(state, slot_name, system_identifier)
        if problem is None:  # a completed baseline of this very slot: the slot was dropped since
            return StartPlan(StartKind.BASELINE, False, reason + " any more (dropped?)",
                             f"replication slot {slot_name} was dropped; changes made since may be missing",
                             cause=BaselineCause.SLOT_DROPPED)
        return StartPlan(StartKind.BASELINE, False, f"{reason} ({problem.detail})", cause=problem.cause)
    problem = _resume_problem(slot, slot_name, database, state, system_identifier, tables)
    if problem is not None:
        lost = problem.cause is BaselineCause.SLOT_INVALIDATED and \
            _state_problem(state, slot_name, system_identifier) is None
        return StartPlan(StartKind.BASELINE, True, problem.detail, problem.detail if lost else "",
                         cause=problem.cause)
    baseline_id = state.baseline_id if state is not None else ""
    return StartPlan(StartKind.RESUME, False, f"baseline {baseline_id} of slot {slot_name} is complete")


def _resume_problem(slot: SlotInfo, slot_name: str, database: str, state: IngestState | None,
                    system_identifier: str, tables: Iterable[TableId | str]) -> BaselineReason | None:
    if slot.plugin != "pgoutput" or slot.database != database or slot.temporary:
        return BaselineReason(BaselineCause.SLOT_UNUSABLE,
                              f"slot {slot_name} is not a permanent pgoutput slot of database {database} "
                              f"(plugin {slot.plugin!r}, database {slot.database!r})")
    if slot.wal_status == "lost":
        return BaselineReason(BaselineCause.SLOT_INVALIDATED,
                              f"slot {slot_name} was invalidated (wal_status lost): the WAL it needed is gone")
    problem = _state_problem(state, slot_name, system_identifier)
    if problem is not None or state is None:
        return problem
    wanted = IngestState.table_names(tables)
    if tuple(state.tables) != wanted:
        return BaselineReason(BaselineCause.TABLES_CHANGED,
                              f"the configured tables changed from {list(state.tables)} to {list(wanted)}")
    return None


def _state_problem(state: IngestState | None, slot_name: str, system_identifier: str) -> BaselineReason | None:
    """Why the recorded state does not prove a completed baseline of this slot on this server (None: it does)."""
    if state is None:
        return BaselineReason(BaselineCause.INITIAL, "no ingest state recorded for this source")
    if state.slot_name != slot_name:
        return BaselineReason(BaselineCause.SLOT_CHANGED,
                              f"the recorded baseline belongs to slot {state.slot_name}, not {slot_name}")
    if state.system_identifier != system_identifier:
        return BaselineReason(BaselineCause.SERVER_CHANGED,
                              f"the recorded baseline was taken on server {state.system_identifier}, "
                              f"this is server {system_identifier}")
    if not state.baseline_complete:
        return BaselineReason(BaselineCause.PREVIOUS_INCOMPLETE, "the previous baseline did not complete")
    return None
