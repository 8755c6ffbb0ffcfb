"""Composition root of the fan-out service: settings in, adapters built, servers run; nothing connects at import."""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import TracerProvider

from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings
from laredo_core.grpc_server import GrpcServer, start_grpc_server
from laredo_core.health import HealthServer
from laredo_core.telemetry import build_tracer_provider

from laredo_fanout.adapters.nats_change_feed import NatsChangeFeed
from laredo_fanout.adapters.otel_observer import OtelObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.adapters.system_clock import SystemClock
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica
from laredo_fanout.application.targets import FanoutTargets
from laredo_fanout.config import FanoutConfig, read_fanout_config
from laredo_fanout.entrypoints.grpc.servicer import SERVICE_NAMES, ReplicationServicer, generic_handlers
from laredo_fanout.ports import ChangeFeed, Clock, FeedSubscription, Observer

log = logging.getLogger(__name__)

SERVICE_NAME = "laredo-fanout"
STOP_GRACE = 2.0  # seconds in-flight calls get when no drain_grace is configured


@dataclass
class FanoutApp:
    """The wired service. run(stop) serves until `stop` is set; grpc_port is known once started."""

    config: FanoutConfig
    targets: FanoutTargets
    replicator: Replicator
    feed: ChangeFeed
    tracer_provider: TracerProvider | None
    grpc_port: int = 0
    health_port: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False

    def readiness(self) -> tuple[bool, dict[str, object]]:
        ready, details = self.targets.readiness()
        if self._stopping:
            return False, {"stopping": True, **details}
        return ready, details

    async def run(self, stop: asyncio.Event) -> None:
        """Shutdown order: health unready, stop gRPC (grace), stop the feed, stop health."""
        config = self.config
        health = HealthServer(config.health_host, config.health_port, ready=self.readiness)
        grpc_server: GrpcServer | None = None
        feed = asyncio.create_task(self.feed.run(self._subscriptions(), self.replicator), name="fanout-feed")
        try:
            await health.start()
            self.health_port = health.port
            grpc_server = await start_grpc_server(
                config.grpc_host, config.grpc_port, (),
                generic_handlers=generic_handlers(ReplicationServicer(self.targets)),
                extra_service_names=SERVICE_NAMES,
            )
            self.grpc_port = grpc_server.port
            self.started.set()
            await _until_stopped_or_failed(stop, feed)
        finally:
            self._stopping = True
            if grpc_server is not None:
                await grpc_server.stop(config.drain_grace or STOP_GRACE)
            feed.cancel()
            await asyncio.gather(feed, return_exceptions=True)
            await health.stop()
            if self.tracer_provider is not None:
                self.tracer_provider.force_flush()

    def _subscriptions(self) -> list[FeedSubscription]:
        return [FeedSubscription(t.source_id, t.table) for t in self.config.targets]


async def _until_stopped_or_failed(stop: asyncio.Event, feed: asyncio.Task[None]) -> None:
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((stopped, feed), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if feed.done():
        feed.result()  # a feed that ends on its own failed: raise its error
        raise RuntimeError("the change feed stopped without an error; it should run until stopped")


def build(settings: LaredoSettings, *, feed: ChangeFeed | None = None, tracer_provider: TracerProvider | None = None,
          clock: Clock | None = None, observer: Observer | None = None) -> FanoutApp:
    """Wire the service from settings; the overrides replace real adapters (tests, embedding)."""
    config = read_fanout_config(settings)
    clock = clock or SystemClock()
    encoder = ProtobufSyncEncoder()
    if observer is None:
        tracer_provider = tracer_provider or build_tracer_provider(settings.telemetry, SERVICE_NAME)
        observer = OtelObserver(tracer_provider)
    replicas = [
        TableReplica(t.source_id, t.table, ReplicaLimits(t.journal_max_entries, t.journal_max_age,
                                                         t.heartbeat_interval, t.max_clients), encoder)
        for t in config.targets
    ]
    targets = FanoutTargets(replicas, encoder=encoder, clock=clock, observer=observer)
    replicator = Replicator({r.table: r for r in replicas}, encoder, clock, observer)
    feed = feed or NatsChangeFeed(config.nats_urls, config.subject_prefix)
    return FanoutApp(config, targets, replicator, feed, tracer_provider)


async def _main(settings: LaredoSettings, _: argparse.Namespace, stop: asyncio.Event) -> None:
    app = build(settings)
    tables = ", ".join(str(t.table) for t in app.config.targets)
    log.info("fan-out for %s; NATS %s", tables, ", ".join(app.config.nats_urls))
    await app.run(stop)


def cli(argv: list[str] | None = None) -> int:
    return run_service(SERVICE_NAME, "Laredo fan-out: table state + change journal served over gRPC Sync.",
                       _main, argv, validate=lambda settings, _: read_fanout_config(settings))
