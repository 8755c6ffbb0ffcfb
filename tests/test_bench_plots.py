"""The bench scripts' plots draw on a machine without a display."""

from __future__ import annotations

from pathlib import Path

from bench.plots import latency_by_clients, memory_by_rows


def test_latency_against_clients_is_drawn_to_a_png(tmp_path: Path) -> None:
    points = [(10, 1000.0, {"p50": 0.9, "p90": 1.3, "p99": 2.9, "max": 10.1}),
              (1000, 100.0, {"p50": 94.0, "p90": 183.0, "p99": 268.0, "max": 351.0})]
    path = latency_by_clients(tmp_path / "plots" / "latency.png", points, goals={"p99 goal": 50.0})
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def test_memory_against_rows_is_drawn_to_a_png(tmp_path: Path) -> None:
    path = memory_by_rows(tmp_path / "memory.png", [(100_000, 165 * 2**20), (1_000_000, 866 * 2**20)], 429.0)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
