"""The short chaos run of the default suite: every fault and every workload event once, in the order a fixed
seed gives (LAREDO_CHAOS_SEED overrides it), against real processes; nothing may be lost, reordered or left
unhealthy. bench/chaos.py runs the same harness for as long as asked, with the 3-node NATS cluster too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosSettings
from tests.chaos.soak import run_chaos

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = int(os.environ.get("LAREDO_CHAOS_SEED", "1125"))


async def test_short_chaos_run_every_replica_equals_the_table(tmp_path: Path) -> None:
    report = await run_chaos(ChaosSettings(seed=SEED, work_dir=tmp_path))
    print(report.render())
    assert not report.failed, report.render()
