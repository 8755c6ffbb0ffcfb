"""PNG plots for the bench scripts (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def latency_by_clients(path: Path, points: Sequence[tuple[int, float, Mapping[str, float]]],
                       goals: Mapping[str, float] = {}, title: str = "") -> Path:
    """Latency percentiles (ms, log scale) against the number of clients (log scale); points are
    (clients, transactions/s, {"p50": ..., "p90": ..., "p99": ..., "max": ...}); goals draw dashed lines."""
    figure, axes = plt.subplots(figsize=(7, 4.5))
    clients = [p[0] for p in points]
    for key, style in (("p50", "o-"), ("p90", "s-"), ("p99", "^-"), ("max", "x:")):
        axes.plot(clients, [p[2][key] for p in points], style, label=key)
    for name, value in goals.items():
        axes.axhline(value, linestyle="--", linewidth=0.8, color="grey")
        axes.annotate(name, (clients[0], value), textcoords="offset points", xytext=(2, 3), fontsize=8)
    for count, rate, latency in points:
        axes.annotate(f"{rate:,.0f} txn/s", (count, latency["p50"]), textcoords="offset points", xytext=(4, -12),
                      fontsize=8)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("Sync clients")
    axes.set_ylabel("publish-to-client latency (ms)")
    axes.set_title(title or "fan-out: publish-to-client latency")
    axes.grid(True, which="both", linewidth=0.3)
    return _save(figure, axes, path)


def memory_by_rows(path: Path, points: Sequence[tuple[int, float]], goal_bytes_per_row: float = 0.0,
                   title: str = "") -> Path:
    """Process RSS (MiB) against the rows it holds; points are (rows, RSS bytes); the goal, in bytes per row, is a
    dashed line from the origin."""
    figure, axes = plt.subplots(figsize=(7, 4.5))
    rows = [p[0] for p in points]
    axes.plot(rows, [p[1] / 2**20 for p in points], "o-", label="fan-out RSS")
    if goal_bytes_per_row:
        axes.plot([0, max(rows)], [0, max(rows) * goal_bytes_per_row / 2**20], "--", color="grey",
                  label=f"goal: {goal_bytes_per_row:,.0f} bytes/row")
    for count, rss in points:
        axes.annotate(f"{rss / count:,.0f} B/row", (count, rss / 2**20), textcoords="offset points", xytext=(4, -12),
                      fontsize=8)
    axes.set_xlabel("rows held")
    axes.set_ylabel("RSS (MiB)")
    axes.set_title(title or "fan-out: memory against rows")
    axes.grid(True, linewidth=0.3)
    return _save(figure, axes, path)


def _save(figure: Any, axes: Any, path: Path) -> Path:
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
