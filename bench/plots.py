"""PNG plots for the bench scripts (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

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
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
