"""Fixtures of the snapshot service's tests: one SparkSession for the whole run (it takes seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[Any]:
    """Spark in local mode with two cores, started at the first test that uses it and stopped at the end."""
    from laredo_snapshot.adapters.spark_session import SparkSessions, SparkSettings  # pyspark only when needed

    sessions = SparkSessions(SparkSettings(master="local[2]", app_name="laredo-snapshot-tests", driver_memory="1g"))
    yield sessions
    sessions.stop()
