"""What a chaos run found, printed so that a failing seed can be replayed and its failure read in one place."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.harness import ChaosSettings, Exit
from tests.chaos.invariants import ProtocolChecker
from tests.chaos.plan import Step
from tests.chaos.workload import WriterStats

EXAMPLES = 3
_NOTEWORTHY = re.compile(r"WARNING|ERROR|CRITICAL|Traceback|\[ERR\]|backwards|gap")
_EXPECTED = re.compile(r"coordination")  # warnings of the planned Redis outage


@dataclass
class StepRecord:
    started: float
    step: Step
    outcome: str
    ok: bool = True
    seconds: float = 0.0

    def __str__(self) -> str:
        mark = "" if self.ok else "FAILED: "
        return f"t={self.started:7.1f}s {self.step.action.value}: {mark}{self.outcome} ({self.seconds:.1f}s)"


def differences(expected: dict[Any, dict[str, Any]], actual: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """How `actual` differs from `expected` row by row and value by value (counts and a few examples)."""
    missing = sorted(expected.keys() - actual.keys())
    extra = sorted(actual.keys() - expected.keys())
    changed = []
    for key in sorted(expected.keys() & actual.keys()):
        if expected[key] != actual[key]:
            cols = sorted(c for c in expected[key].keys() | actual[key].keys()
                          if expected[key].get(c) != actual[key].get(c))
            changed.append((key, {c: (_short(expected[key].get(c)), _short(actual[key].get(c))) for c in cols}))
    return {"rows": len(actual), "expected_rows": len(expected), "missing": len(missing),
            "extra": len(extra), "different": len(changed), "missing_ids": missing[:EXAMPLES],
            "extra_ids": extra[:EXAMPLES], "different_rows": changed[:EXAMPLES]}


def _short(value: Any) -> Any:
    return value[:40] + f"...({len(value)} chars)" if isinstance(value, str) and len(value) > 48 else value


@dataclass
class ChaosReport:
    settings: ChaosSettings
    plan: list[Step]
    steps: list[StepRecord] = field(default_factory=list)
    writer: WriterStats | None = None
    checkers: list[ProtocolChecker] = field(default_factory=list)
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    mismatches: dict[str, dict[str, Any]] = field(default_factory=dict)  # consumer -> differences (unequal only)
    converged_after: float | None = None
    unhealthy: list[str] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    stop_codes: dict[str, int | None] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    error: str = ""  # the run could not finish (set up, writer, convergence wait)

    @property
    def violations(self) -> int:
        return sum(c.count for c in self.checkers)

    @property
    def failures(self) -> list[str]:
        found = [f"the run did not finish: {self.error}"] if self.error else []
        found += [f"{len(self.mismatches)} consumer(s) differ from SELECT *: {', '.join(self.mismatches)}"
                  ] if self.mismatches else []
        found += [f"{self.violations} protocol violation(s)"] if self.violations else []
        found += [f"unhealthy at the end: {'; '.join(self.unhealthy)}"] if self.unhealthy else []
        found += [f"{e.service} exited by itself with {e.code} at t={e.at:.1f}s" for e in self.exits]
        found += [f"step failed: {s}" for s in self.steps if not s.ok]
        found += [f"client {name} stopped for good: {c['failure']}" for name, c in self.clients.items()
                  if c.get("failure")]
        found += [f"{name} did not stop cleanly on SIGTERM (exit {code})" for name, code in self.stop_codes.items()
                  if code not in (0, None)]
        return found

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def render(self) -> str:
        s = self.settings
        mode = "3-node NATS cluster" if s.cluster else "single NATS node"
        length = "short run" if s.minutes is None else f"{s.minutes:g} minutes"
        lines = [f"chaos seed {s.seed} ({length}, {mode}, {s.rate:g} changes/s); replay: "
                 f"bench/chaos.py --seed {s.seed}{'' if s.minutes is None else f' --minutes {s.minutes:g}'}"
                 f"{' --cluster' if s.cluster else ''} (same workload and faults; process timing differs)",
                 "steps:", *(f"  {r}" for r in self.steps)]
        counts = Counter(r.step.action.name for r in self.steps)
        lines.append("step counts: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        if self.writer is not None:
            w = self.writer
            lines.append(f"writer: {w.transactions} transactions, {w.changes} changes, {w.broken} broken by faults")
            lines += [f"  t={t:7.1f}s {event}: {outcome}" for t, event, outcome in w.events]
        lines.append("clients:")
        lines += [f"  {name}: {stats}" for name, stats in self.clients.items()]
        for checker in self.checkers:
            lines.append(f"  {checker.client}: {checker.streams_seen} streams ({checker.by_sequence} asked by "
                         f"sequence) {checker.modes}, {checker.count} protocol violations")
            lines += [f"    {v}" for v in checker.violations[:10]]
        for consumer, diff in self.mismatches.items():
            lines.append(f"MISMATCH {consumer}: {diff}")
        if self.converged_after is not None:
            lines.append(f"every replica equals SELECT * {self.converged_after:.1f}s after the writer stopped")
        for exit_ in self.exits:
            lines.append(f"EXIT t={exit_.at:.1f}s {exit_.service} code {exit_.code}:\n{_indent(exit_.log)}")
        lines.append(f"stop exit codes: {self.stop_codes}")
        if self.failed:
            lines.append("log excerpts:")
            lines += [f"  {name} ({path}):\n{_indent(noteworthy(path))}" for name, path in self.logs.items()]
        lines.append("RESULT: " + ("FAIL\n  " + "\n  ".join(self.failures) if self.failed else
                                   f"PASS (0 mismatches, 0 protocol violations, {len(self.steps)} steps)"))
        return "\n".join(lines)


def noteworthy(path: Path, lines: int = 12) -> str:
    """The last `lines` log lines that report errors, gaps, backwards positions or missing acks."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    found = [line[:400] for line in text if _NOTEWORTHY.search(line) and not _EXPECTED.search(line)]
    return "\n".join(found[-lines:]) or "(nothing noteworthy)"


def _indent(text: str) -> str:
    return "\n".join(f"      {line}" for line in text.splitlines())
