"""The SparkSession of the snapshot service: local mode by default, a cluster through `spark.master`.

Created on first use (about 6 s and 1.5 GiB for a local JVM) and kept for every later compaction. Python
workers run this very interpreter (PYSPARK_PYTHON), so they import the same laredo packages; on a cluster
the workers need the same image (docker-compose.yml uses it for the Spark master and worker).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SparkSettings:
    master: str = "local[*]"
    app_name: str = "laredo-snapshot"
    driver_memory: str = "1g"
    conf: Mapping[str, str] = field(default_factory=dict)  # any further spark.* setting


class SparkSessions:
    """One SparkSession, built from settings at the first get(); stop() ends it."""

    def __init__(self, settings: SparkSettings) -> None:
        self.settings = settings
        self._session: SparkSession | None = None
        self._lock = threading.Lock()

    def get(self) -> SparkSession:
        with self._lock:
            if self._session is None or self._session.sparkContext._jsc is None:  # none yet, or stopped elsewhere
                self._session = self._build()
            return self._session

    def stop(self) -> None:
        with self._lock:
            session, self._session = self._session, None
            if session is not None and session.sparkContext._jsc is not None:  # not stopped elsewhere already
                session.sparkContext.cancelAllJobs()  # a compaction still running fails now
                session.stop()

    def _build(self) -> SparkSession:
        settings = self.settings
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = (SparkSession.builder.master(settings.master).appName(settings.app_name)
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", settings.driver_memory))
        for key, value in settings.conf.items():
            builder = builder.config(key, value)
        log.info("starting Spark (master %s, driver memory %s)", settings.master, settings.driver_memory)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        log.info("Spark %s ready, default parallelism %d", session.version, session.sparkContext.defaultParallelism)
        return session
