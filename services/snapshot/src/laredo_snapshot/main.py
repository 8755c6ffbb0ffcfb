"""Composition root of the snapshot service: settings in, adapters built, passes run (`--once`: one, then exit)."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings
from laredo_core.coordination.ids import default_instance_id
from laredo_kernel.errors import ConfigError
from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.health import HealthServer
from laredo_core.metrics import MetricsEndpoint, observe
from laredo_core.rebuild.tail import StreamTail
from laredo_core.runtime import ServiceRun, until_stopped_or_failed
from laredo_core.shutdown import close_quietly
from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.factory import SnapshotStores
from laredo_core.stream.nats_tail import NatsStreamTail
from laredo_core.telemetry import build_meter_provider, build_tracer_provider

from laredo_snapshot.adapters.metrics import snapshot_figures
from laredo_snapshot.adapters.nats_stream_bounds import NatsStreamBounds
from laredo_snapshot.adapters.otel_observer import OtelObserver
from laredo_snapshot.adapters.sequential_compactor import SequentialCompactor
from laredo_snapshot.adapters.system_clock import SystemClock
from laredo_snapshot.application.compaction import TableCompaction
from laredo_snapshot.application.phases import PhaseTracker
from laredo_snapshot.application.coordination import SnapshotCoordinator
from laredo_snapshot.application.service import SnapshotService, TableRun
from laredo_snapshot.config import SnapshotConfig, read_snapshot_config
from laredo_snapshot.domain.errors import SnapshotServiceError
from laredo_snapshot.ports import Compactor, Observer, SnapshotStore

log = logging.getLogger(__name__)

SERVICE_NAME = "laredo-snapshot"


@dataclass
class SnapshotApp:
    """The wired service: run_once() for one pass, serve(stop) until stop is set."""

    config: SnapshotConfig
    service: SnapshotService
    coordinator: SnapshotCoordinator | None = None
    tracer_provider: TracerProvider | None = None
    closers: list[Callable[[], Awaitable[None] | None]] = field(default_factory=list)
    health_port: int = 0
    health_tls: TlsSettings | None = None  # the shared tls section: /health/* over HTTPS
    metrics: MetricsEndpoint | None = None  # GET /metrics on the health port
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        status = self.service.status()
        ready = self.started.is_set() and not self._stopping
        return ready, {**status, "ready": ready, **({"stopping": True} if self._stopping else {})}

    async def run_once(self, tables: Sequence[str] = ()) -> list[TableRun]:
        """One pass (heartbeats meanwhile when coordinated); SnapshotServiceError if a table failed."""
        async with ServiceRun("snapshot service") as run:
            self._coordinate(run)
            self.started.set()
            runs = await self.service.run_pass(self.service.resolve(list(tables)))
        failed = [r for r in runs if r.error]
        if failed:
            raise SnapshotServiceError(f"{len(failed)} of {len(runs)} table(s) failed: "
                                       + "; ".join(f"{r.table}: {r.error}" for r in failed))
        return runs

    async def serve(self, stop: asyncio.Event) -> None:
        """Shutdown order: unready, stop scheduling (a running Spark job is cancelled), coordination, clients."""
        async with ServiceRun("snapshot service", self._unready) as run:
            health = await run.listen("snapshot.health_host/snapshot.health_port", HealthServer(
                self.config.health_host, self.config.health_port, ready=self.readiness,
                tls=self.health_tls, metrics=self.metrics).start(), HealthServer.stop)
            self.health_port = health.port
            self._coordinate(run)
            schedule = run.spawn(self.service.run_every_interval(first_now=self.config.run_on_start),
                                 "snapshot-schedule")
            self.started.set()
            await until_stopped_or_failed(stop, schedule, "the snapshot schedule")

    def _unready(self) -> None:
        self._stopping = True

    def _coordinate(self, run: ServiceRun) -> None:
        """Heartbeats and commands while the run lasts; the clients closed (and spans flushed) when it ends."""
        if self.tracer_provider is not None:
            run.on_stop(self.tracer_provider.force_flush)
        for close in self.closers:
            run.on_stop(close_quietly, getattr(close, "__qualname__", "a client of the snapshot service"), close)
        if self.coordinator is not None:
            run.spawn(self.coordinator.run(), "snapshot-coordination")


def build(settings: LaredoSettings, *, tail: StreamTail | None = None,
          store_for: Callable[[StoreConfig], SnapshotStore] | None = None, compactor: Compactor | None = None,
          observer: Observer | None = None) -> SnapshotApp:
    """Wire the service from settings; the overrides replace real adapters (tests, embedding)."""
    config = read_snapshot_config(settings)
    clock = SystemClock()
    closers: list[Callable[[], Awaitable[None] | None]] = []
    metrics = MetricsEndpoint()
    meter_provider = build_meter_provider(settings.telemetry, SERVICE_NAME, metrics=metrics)
    tracer_provider = None
    if observer is None:
        tracer_provider = build_tracer_provider(settings.telemetry, SERVICE_NAME)
        observer = OtelObserver(tracer_provider, meter_provider)
    observer = phases = PhaseTracker(observer)  # what every compactor reports to: the running phase, for the status
    store_for = store_for or SnapshotStores().store_for
    bounds = NatsStreamBounds(config.nats_urls, config.subject_prefix, client_name=SERVICE_NAME)
    closers.append(bounds.aclose)
    if tail is None:
        tail = NatsStreamTail(config.nats_urls, config.subject_prefix, json_values=True, client_name=SERVICE_NAME)
        closers.append(tail.aclose)
    if compactor is None:
        compactor = SequentialCompactor(tail, store_for, observer)
        if config.engine == "spark":
            compactor = _spark_compactor(config, compactor, store_for, observer, closers)
    compactions = [TableCompaction(job, store_for(job.store), bounds, compactor, clock, observer)
                   for job in config.tables]
    service = SnapshotService(compactions, clock, observer, interval=config.interval, phases=phases)
    observe(meter_provider.get_meter("laredo_snapshot"), snapshot_figures(service))
    coordinator = None
    if "redis" in settings.raw:
        from laredo_core.coordination.redis_store import RedisCoordinationStore  # connects lazily

        coordinator = SnapshotCoordinator(RedisCoordinationStore(settings.redis.url, settings.redis.key_prefix),
                                          config.instance_id or default_instance_id("snapshot"), service,
                                          heartbeat_interval=config.status_interval)
    return SnapshotApp(config, service, coordinator, tracer_provider, closers, health_tls=settings.front_door.tls,
                       metrics=metrics)


def _spark_compactor(config: SnapshotConfig, sequential: Compactor, store_for: Callable[[StoreConfig], SnapshotStore],
                     observer: Observer, closers: list[Callable[[], Awaitable[None] | None]]) -> Compactor:
    """Imported here: pyspark loads only when the Spark engine is used."""
    from laredo_snapshot.adapters.pyspark_compactor import PysparkCompactor
    from laredo_snapshot.adapters.spark_session import SparkSessions, SparkSettings
    from laredo_snapshot.adapters.spark_tasks import NatsTailOpener

    sessions = SparkSessions(SparkSettings(config.spark.master, SERVICE_NAME, config.spark.driver_memory,
                                           dict(config.spark.conf)))
    closers.append(sessions.stop)
    return PysparkCompactor(sessions, NatsTailOpener(config.nats_urls, config.subject_prefix), store_for,
                            sequential, observer, partitions=config.partitions)


def _add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true",
                        help="compact every table once and exit (exit code 1 if a table failed): for cron and CI")
    parser.add_argument("--table", action="append", default=[], metavar="SCHEMA.TABLE",
                        help="with --once: only this table (repeatable)")


async def _main(settings: LaredoSettings, args: argparse.Namespace, stop: asyncio.Event) -> None:
    app = build(settings)
    tables = ", ".join(str(t.table) for t in app.config.tables)
    log.info("snapshot service for %s; engine %s (Spark master %s); NATS %s", tables, app.config.engine,
             app.config.spark.master, ", ".join(app.config.nats_urls))
    if args.once:
        runs = await app.run_once(args.table)
        for run in runs:
            log.info("%s: %s", run.table, run.snapshot_id or run.reason)
        return
    if args.table:
        log.warning("--table applies to --once only; serving every configured table")
    await app.serve(stop)


def _validate(settings: LaredoSettings, args: argparse.Namespace) -> SnapshotConfig:
    config = read_snapshot_config(settings)
    known = {str(t.table) for t in config.tables}
    unknown = [t for t in args.table if t not in known]
    if unknown:
        raise ConfigError([f"--table {t}: not compacted by this service (it compacts {', '.join(sorted(known))})"
                           for t in unknown])
    return config


def cli(argv: list[str] | None = None) -> int:
    return run_service(SERVICE_NAME, "Laredo snapshot service: compacts snapshot + stream tail into new snapshots "
                       "(PySpark).", _main, argv, extend=_add_flags, validate=_validate)

