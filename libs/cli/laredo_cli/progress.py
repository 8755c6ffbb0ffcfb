"""Long work in progress — baselines, restores and replays, snapshot compactions — with rows, rate and ETA.

Read from what OAM already answers: each source's ingest report (GetStatus: its running baseline's rows, the
planner's row estimate, rate and ETA) and each instance's last heartbeat (ListInstances: the rebuilds it runs,
by phase, and the table the snapshot service is compacting).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The phases every restore and replay goes through, in order (laredo_core.rebuild.records.RebuildPhase).
REBUILD_PHASES = ("waiting", "loading", "tail", "catching_up", "installing", "done")
BAR_WIDTH = 24


@dataclass(frozen=True, slots=True)
class Work:
    kind: str  # baseline, restore, replay, compaction
    what: str  # the table, and where the work runs
    rows: int = 0
    total: int = 0  # rows expected; 0 = not known
    rate: float = 0.0  # rows per second
    eta: float = 0.0  # seconds left; 0 = not known
    step: str = ""  # where a multi-step work is, e.g. "tail (3/6)"
    fraction: float | None = None  # how much is done (the bar); None = not known
    elapsed: float = 0.0  # seconds since it started

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "what": self.what, "rows": self.rows, "total": self.total,
                "rows_per_second": round(self.rate, 1), "eta_seconds": round(self.eta, 1), "step": self.step,
                "fraction": None if self.fraction is None else round(self.fraction, 4),
                "elapsed_seconds": round(self.elapsed, 1)}


def in_progress(sources: Iterable[tuple[str, Mapping[str, Any]]], instances: Iterable[Mapping[str, Any]],
                now_unix_ms: int) -> list[Work]:
    """`sources`: (source id, its ingest report); `instances`: {service, instance_id, status} of each instance."""
    work = [baseline for source_id, report in sources if (baseline := _baseline(source_id, report))]
    for instance in instances:
        status = instance.get("status") or {}
        where = f"{instance.get('service', '?')} {instance.get('instance_id', '?')}"
        work += [_rebuild(report, where, now_unix_ms) for report in (status.get("replays") or {}).values()
                 if isinstance(report, Mapping) and report.get("state") == "running"]
        if status.get("compacting"):
            work.append(_compaction(status, where, now_unix_ms))
    return work


def _baseline(source_id: str, report: Mapping[str, Any]) -> Work | None:
    baseline = report.get("baseline")
    if not isinstance(baseline, Mapping) or not baseline.get("running"):
        return None
    rows, total = int(baseline.get("rows") or 0), int(baseline.get("expected_rows") or 0)
    return Work("baseline", f"{baseline.get('table') or '?'} (source {source_id})", rows, total,
                float(baseline.get("rows_per_second") or 0), float(baseline.get("eta_seconds") or 0),
                fraction=min(1.0, rows / total) if total > 0 else None)


def _rebuild(report: Mapping[str, Any], where: str, now_unix_ms: int) -> Work:
    phase = str(report.get("phase") or "waiting")
    step = REBUILD_PHASES.index(phase) if phase in REBUILD_PHASES else 0
    started = int(report.get("started_unix_ms") or 0)
    elapsed = max(0.0, (now_unix_ms - started) / 1000) if started else 0.0
    rows = int(report.get("rows_replayed") or 0)
    return Work(str(report.get("kind") or "rebuild"), f"{report.get('table', '?')} on {where}", rows,
                rate=rows / elapsed if elapsed > 0 else 0.0, step=f"{phase} ({step + 1}/{len(REBUILD_PHASES)})",
                fraction=step / (len(REBUILD_PHASES) - 1), elapsed=elapsed)


def _compaction(status: Mapping[str, Any], where: str, now_unix_ms: int) -> Work:
    since = int(status.get("compacting_since_unix_ms") or 0)
    step, steps = int(status.get("compacting_step") or 0), int(status.get("compacting_steps") or 0)
    return Work("compaction", f"{status['compacting']} on {where}",
                step=f"{status.get('compacting_phase')} ({step}/{steps})" if step and steps else "",
                fraction=(step - 1) / steps if step and steps else None,
                elapsed=max(0.0, (now_unix_ms - since) / 1000) if since else 0.0)


def bar(fraction: float | None, width: int = BAR_WIDTH) -> str:
    """[#########...............] 37%, or a bar of dots when how much is done is not known."""
    if fraction is None:
        return "[" + "." * width + "]   ?"
    fraction = max(0.0, min(1.0, fraction))
    done = round(fraction * width)
    return f"[{'#' * done}{'.' * (width - done)}] {round(fraction * 100):3d}%"


def describe(work: Work) -> str:
    """One line: kind, what, the bar, rows (of total), rate, ETA or elapsed time, step."""
    rows = f"{work.rows:,}" + (f"/{work.total:,}" if work.total else "") + " rows" if work.rows or work.total else ""
    rate = f"{work.rate:,.0f} rows/s" if work.rate else ""
    time_left = f"ETA {_seconds(work.eta)}" if work.eta else (f"for {_seconds(work.elapsed)}" if work.elapsed else "")
    parts = [p for p in (rows, rate, time_left, work.step) if p]
    return f"{work.kind:<10} {work.what}  {bar(work.fraction)}  {', '.join(parts)}".rstrip()


def _seconds(value: float) -> str:
    value = round(value)
    return f"{value // 3600}h{value % 3600 // 60:02d}m" if value >= 3600 else \
        f"{value // 60}m{value % 60:02d}s" if value >= 60 else f"{value}s"


def lines(work: Sequence[Work]) -> list[str]:
    return [describe(w) for w in work] or ["(nothing long running)"]
