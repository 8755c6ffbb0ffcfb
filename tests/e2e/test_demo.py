"""The README's demos run to the end: the short one (ingest and fan-out to one client) and `scripts/demo --full`
(the whole system, no Docker: PostgreSQL, NATS, Redis, S3, ingest, two fan-outs, query, OAM and the snapshot
service on Spark, toured with the CLI, a drain with the client handing over, a trace, and every replica
checked against the table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def run(script: str, *args: str, timeout: float) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{script} exited with {done.returncode}:\n{output[-6000:]}"
    return output


def test_the_full_stack_comes_up_and_its_tour_passes() -> None:
    output = run("demo_full.py", timeout=600)
    for step in ("$ laredo status", "$ laredo lookup public.demo_items item 42", "$ laredo snapshots create",
                 "$ laredo drain --instance", "the client moved to", "The trace of one change",
                 "ingest.publish", "fanout.sync.send", "The tour passed: every replica equals the table."):
        assert step in output, f"the tour's output lacks {step!r}:\n{output[-6000:]}"
    assert "DIFFERS" not in output
    assert output.count("written by") >= 1 and "web console  http://" in output


def test_the_short_demo_ends_with_the_replica_equal_to_the_table() -> None:
    output = run("demo.py", "--seconds", "5", timeout=300)
    assert "replica equals the table" in output, output[-4000:]
