"""Composition root of the query service: settings in, adapters built, servers run; nothing connects at import."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from functools import partial
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from grpc_health.v1 import health_pb2

from laredo_core.cli import run_service
from laredo_kernel.changes import TableId
from laredo_core.config import LaredoSettings, ServiceEndpoint
from laredo_core.coordination.ids import default_instance_id
from laredo_core.coordination.ports import CoordinationStore
from laredo_core.frontdoor.settings import FrontDoorSettings
from laredo_core.grpc_server import GrpcServer, start_grpc_server
from laredo_core.deadletters.store import DeadLetterStore
from laredo_core.deadletters.wiring import DeadLetterWiring, wire_dead_letters
from laredo_core.health import HealthServer
from laredo_core.metrics import MetricsEndpoint, observe
from laredo_core.rebuild.gate import GatedSink
from laredo_core.rebuild.instance import InstanceRebuilds
from laredo_core.rebuild.tail import StreamTail
from laredo_core.runtime import ServiceRun, until_stopped_or_failed
from laredo_core.snapshots.factory import SnapshotStores
from laredo_core.snapshots.store import SnapshotStore
from laredo_core.stream.memory_bounds import MemoryStreamBoundsReader
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_core.stream.memory_tail import MemoryStreamTail
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.nats_bounds import NatsStreamBoundsReader
from laredo_core.stream.nats_feed import NatsChangeFeed
from laredo_core.stream.nats_tail import NatsStreamTail
from laredo_core.telemetry import build_meter_provider

from laredo_query.adapters.codec_stream_bounds import CodecStreamBounds
from laredo_query.adapters.metrics import query_figures
from laredo_query.adapters.system_clock import SystemClock
from laredo_query.application.applier import TARGET_TYPE, ChangeApplier
from laredo_query.application.dead_letter_replay import QueryDeadLetterReplay
from laredo_query.application.coordination import QueryCoordinator
from laredo_query.application.queries import QueryService
from laredo_query.application.rebuild import QueryRebuildTarget
from laredo_query.application.startup_restore import RestoreSource, StartupRestore
from laredo_query.application.query_table import QueryTable, ReadinessSignal
from laredo_query.application.subscriptions import SubscriberHub
from laredo_query.config import QueryConfig, advertised_address, read_query_config
from laredo_query.domain.errors import ServiceStopping
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.entrypoints.grpc.servicer import QUERY_SERVICE_NAMES, QueryServicer, generic_handlers
from laredo_query.ports import ChangeFeed, Clock, FeedSubscription, StreamBounds

log = logging.getLogger(__name__)

SERVICE_NAME = "laredo-query"
STOP_GRACE = 2.0  # seconds in-flight calls get when no drain_grace is configured
_SERVING, _NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class QueryApp:
    """The wired service. run(stop) serves until `stop` is set; ports are known once `started` is set. Ready
    (HTTP /health/ready and gRPC health for "", both service names and each "schema.table"): every table loaded
    (baseline complete, caught up), its indexes fitting its columns, not stale."""

    config: QueryConfig
    service: QueryService
    applier: ChangeApplier
    feed: ChangeFeed
    signal: ReadinessSignal
    clock: Clock
    coordinator: QueryCoordinator | None = None  # status heartbeat and commands (when Redis is configured)
    close_coordination: Callable[[], Awaitable[None]] | None = None
    sink: GatedSink | None = None  # in front of the applier: holds a table's messages while a rebuild installs
    dead_letters: DeadLetterWiring | None = None  # stores what cannot be applied, in the background
    startup: StartupRestore | None = None  # loads tables from snapshots before the feed starts
    front_door: FrontDoorSettings | None = None  # None: grpcio serves the port itself
    metrics: MetricsEndpoint | None = None  # GET /metrics on the health port
    grpc_port: int = 0
    health_port: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        ready, details = self.service.readiness()
        if self._stopping:
            return False, {"stopping": True, **details}
        if not self.grpc_port:  # its port (the front door) does not answer yet: clients would be refused
            return False, {"grpc": "starting", **details}
        return ready, details

    async def run(self, stop: asyncio.Event) -> None:
        """Start-up: health, snapshots, feed, gRPC. Shutdown order (the reverse): unready, end subscriptions, stop
        gRPC (grace), stop the feed, dead letters, coordination, health."""
        endpoint = self.config.endpoint
        async with ServiceRun("query service", self._stop_serving) as run:
            if self.close_coordination is not None:
                run.on_stop(self.close_coordination)
            health = await run.listen("query.health_host/query.health_port", HealthServer(
                endpoint.health_host, endpoint.health_port, ready=self.readiness,
                tls=self.front_door.tls if self.front_door else None, metrics=self.metrics).start(),
                HealthServer.stop)
            self.health_port = health.port
            if self.dead_letters is not None:
                run.on_stop(self.dead_letters.close)
                run.spawn(self.dead_letters.run(), "query-dead-letters")
                run.on_stop(self.dead_letters.flush)
            subscriptions = await self._restore()
            feed = run.spawn(self.feed.run(subscriptions, self.sink or self.applier), "query-feed")
            grpc_server = await run.listen("query.grpc.host/query.grpc.port", start_grpc_server(
                endpoint.grpc_host, endpoint.grpc_port, (),
                generic_handlers=generic_handlers(QueryServicer(self.service, self.clock)),
                extra_service_names=QUERY_SERVICE_NAMES, front_door=self.front_door, name="query"),
                partial(GrpcServer.stop, grace=endpoint.drain_grace or STOP_GRACE))
            self.grpc_port = grpc_server.port
            run.on_stop(self._unserve, grpc_server)
            await self._mirror_readiness(grpc_server)
            run.spawn(self._keep_mirroring(grpc_server), "query-readiness")
            if self.coordinator is not None:
                self.coordinator.address = advertised_address(self.config, self.grpc_port)
                run.spawn(self.coordinator.run(), "query-coordination")  # deregisters this instance when cancelled
            self.started.set()
            log.info("query service on gRPC port %d, health port %d, serving %s", self.grpc_port,
                     self.health_port, ", ".join(t.name for t in self.service.tables) or "no table")
            await until_stopped_or_failed(stop, feed)

    def _stop_serving(self) -> None:
        self._stopping = True
        self.service.end_subscriptions(ServiceStopping(
            "the query service is shutting down; subscribe again (another instance, or this one after its restart)"))

    async def _unserve(self, grpc_server: GrpcServer) -> None:
        await grpc_server.set_serving(False)
        for table in self.service.tables:
            await grpc_server.health.set(table.name, _NOT_SERVING)

    async def _keep_mirroring(self, grpc_server: GrpcServer) -> None:
        while True:
            changed = self.signal.changed()  # taken first: a change while mirroring wakes the next round
            await self._mirror_readiness(grpc_server)
            await changed.wait()

    async def _mirror_readiness(self, grpc_server: GrpcServer) -> None:
        tables = self.service.tables
        overall = _SERVING if all(t.ready for t in tables) else _NOT_SERVING
        for name in ("", *QUERY_SERVICE_NAMES):
            await grpc_server.health.set(name, overall)
        for table in tables:
            await grpc_server.health.set(table.name, _SERVING if table.ready else _NOT_SERVING)

    async def _restore(self) -> list[FeedSubscription]:
        """Tables loaded from a snapshot consume the stream after its stream sequence; the others all of it."""
        restored = await self.startup.restore() if self.startup is not None else {}
        starts = {table: manifest.stream_sequence for table, manifest in restored.items()}
        if self.sink is not None:
            for table, sequence in starts.items():
                self.sink.started_after(table, sequence)  # what rebuilds wait for counts from there
        return [FeedSubscription(t.source_id, t.table, starts.get(t.table, 0)) for t in self.config.targets]


def build(settings: LaredoSettings, *, feed: ChangeFeed | None = None, clock: Clock | None = None,
          coordination: CoordinationStore | None = None, stream_tail: StreamTail | None = None,
          snapshot_store: SnapshotStore | None = None, dead_letter_store: DeadLetterStore | None = None,
          stream_bounds: StreamBounds | None = None, **endpoint_overrides: Any) -> QueryApp:
    """Wire the service from settings; the keyword arguments replace real adapters (tests, embedding), and
    `endpoint_overrides` fields of settings.query (grpc_port=0, health_host=..., drain_grace=..., instance_id=...).

    coordination: by default Redis when the file has a redis section (an unreachable Redis never stops the data).
    stream_tail, stream_bounds: what restores and replays read the tail with, and where start-up reads the
    stream's bounds to choose each table's snapshot: JetStream, or the memory feed's when `feed` is a
    MemoryChangeFeed (no bounds for another feed: no snapshot loads). snapshot_store replaces each table's
    configured store; dead_letter_store the JetStream dead-letter store (when dead_letters.enabled)."""
    unknown = set(endpoint_overrides) - {f.name for f in dataclasses.fields(ServiceEndpoint)}
    if unknown:
        raise TypeError(f"build() got unknown overrides {sorted(unknown)}; expected fields of ServiceEndpoint")
    config = read_query_config(settings)
    config = dataclasses.replace(config, endpoint=dataclasses.replace(config.endpoint, **endpoint_overrides))
    clock = clock or SystemClock()
    signal = ReadinessSignal()
    tables = [
        QueryTable(t.source_id, t.table, IndexedTable(str(t.table), t.indexes),
                   SubscriberHub(str(t.table), config.subscriber_buffer, config.subscriber_overflow), signal)
        for t in config.targets
    ]
    if not tables:
        log.warning("no table has an indexed-memory target: every query answers NOT_FOUND (add targets = "
                    "[{ type = indexed-memory, lookup_fields = [...] }] to a table)")
    applier = ChangeApplier({t.table: t for t in tables}, clock)
    gate = GatedSink(applier)
    feed = feed or NatsChangeFeed(config.nats_urls, config.subject_prefix, json_values=True,
                                  client_name="laredo-query")
    service = QueryService(tables)
    close_coordination = None
    if coordination is None and "redis" in settings.raw:  # as for fan-out
        from laredo_core.coordination.redis_store import RedisCoordinationStore  # connects lazily

        redis_store = RedisCoordinationStore(settings.redis.url, settings.redis.key_prefix)
        coordination, close_coordination = redis_store, redis_store.aclose
    instance_id = config.endpoint.instance_id or default_instance_id(SERVICE_NAME)
    dead_letters = wire_dead_letters(settings, TARGET_TYPE, f"query:{instance_id}", store=dead_letter_store)
    applier.dead_letters = dead_letters.recorder
    replay = QueryDeadLetterReplay({t.table: t for t in tables}, clock, partial(
        decode_batch, json_values=True)) if dead_letters.enabled else None
    shared = SnapshotStores()  # one store per distinct configuration; `snapshot_store` replaces every one
    stores = {t.table: snapshot_store or shared.store_for(t.snapshot_store) for t in config.targets
              if t.snapshot_store is not None or snapshot_store is not None}
    startup = _startup_restore(config, tables, stores, feed, stream_bounds)
    coordinator = QueryCoordinator(
        coordination, instance_id, service, signal, heartbeat_interval=config.status_interval,
        rebuilds=_rebuilds(config, instance_id, tables, gate, clock, coordination, feed, stream_tail, stores),
        dead_letter_replay=replay) if coordination is not None else None
    metrics = MetricsEndpoint()
    observe(build_meter_provider(settings.telemetry, SERVICE_NAME, metrics=metrics).get_meter("laredo_query"),
            query_figures(tables))
    return QueryApp(config, service, applier, feed, signal, clock, coordinator, close_coordination, sink=gate,
                    dead_letters=dead_letters, startup=startup, front_door=settings.front_door, metrics=metrics)


def _startup_restore(config: QueryConfig, tables: list[QueryTable], stores: dict[TableId, SnapshotStore],
                     feed: ChangeFeed, bounds: StreamBounds | None) -> StartupRestore | None:
    """Start-up from snapshots for the tables with a store and restore_on_start (None: no table has both)."""
    by_table = {t.table: t for t in tables}
    sources = [RestoreSource(by_table[t.table], t.indexes, stores[t.table]) for t in config.targets
               if t.restore_on_start and t.table in stores]
    if not sources:
        return None
    if bounds is None and isinstance(feed, MemoryChangeFeed):
        bounds = CodecStreamBounds(MemoryStreamBoundsReader(feed))
    elif bounds is None and isinstance(feed, NatsChangeFeed):
        bounds = CodecStreamBounds(NatsStreamBoundsReader(config.nats_urls, config.subject_prefix,
                                                          client_name="laredo-query-restore"))
    if bounds is None:
        log.warning("no snapshot is loaded at start-up: this change feed cannot tell where its stream stands "
                    "(pass stream_bounds to build())")
        return None
    return StartupRestore(sources, bounds)


def _rebuilds(config: QueryConfig, instance_id: str, tables: list[QueryTable], gate: GatedSink, clock: Clock,
              coordination: CoordinationStore, feed: ChangeFeed, tail: StreamTail | None,
              stores: dict[TableId, SnapshotStore]) -> InstanceRebuilds | None:
    """Restores and replays (OAM commands) of this instance's tables, from the snapshot stores configured."""
    if tail is None and isinstance(feed, MemoryChangeFeed):
        tail = MemoryStreamTail(feed, json_values=True)
    elif tail is None and isinstance(feed, NatsChangeFeed):
        tail = NatsStreamTail(config.nats_urls, config.subject_prefix, json_values=True,
                              client_name="laredo-query-rebuild")
    if tail is None:
        return None
    targets = {t.table: QueryRebuildTarget(t, gate, clock) for t in tables}
    return InstanceRebuilds("query", instance_id, targets, stores.get, tail, gate, coordination=coordination)


async def _main(settings: LaredoSettings, _: argparse.Namespace, stop: asyncio.Event) -> None:
    await build(settings).run(stop)


def cli(argv: list[str] | None = None) -> int:
    return run_service(SERVICE_NAME, "Laredo query: indexed in-memory tables served over gRPC TableSyncQuery.",
                       _main, argv, validate=lambda settings, _: read_query_config(settings), workers="query")


if __name__ == "__main__":
    raise SystemExit(cli())
