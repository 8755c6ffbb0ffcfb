"""Composition root of the fan-out service: settings in, adapters built, servers run; nothing connects at import."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
from functools import partial
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import TracerProvider

from laredo_core.cli import STOP_GRACE as STOP_GRACE_AFTER_DRAIN
from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings
from laredo_core.coordination.ids import default_instance_id
from laredo_core.coordination.ports import CoordinationStore
from laredo_core.frontdoor.settings import FrontDoorSettings
from laredo_core.grpc_server import GrpcServer, start_grpc_server
from laredo_core.deadletters.store import DeadLetterStore
from laredo_core.deadletters.wiring import DeadLetterWiring, wire_dead_letters
from laredo_core.health import HealthServer
from laredo_core.runtime import ServiceRun, until_stopped_or_failed
from laredo_core.snapshots.factory import SnapshotStores
from laredo_core.rebuild.gate import GatedSink
from laredo_core.rebuild.instance import InstanceRebuilds
from laredo_core.rebuild.tail import StreamTail
from laredo_core.stream.memory_feed import MemoryChangeFeed
from laredo_core.stream.memory_tail import MemoryStreamTail
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.nats_feed import NatsChangeFeed
from laredo_core.stream.nats_tail import NatsStreamTail
from laredo_core.metrics import MetricsEndpoint, observe
from laredo_core.telemetry import build_meter_provider, build_tracer_provider

from laredo_fanout.adapters.memory import SilentObserver
from laredo_fanout.adapters.metrics import fanout_figures
from laredo_fanout.adapters.otel_observer import OtelObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.adapters.system_clock import SystemClock
from laredo_fanout.application.coordination import FanoutCoordinator
from laredo_fanout.application.dead_letter_replay import TARGET_TYPE, FanoutDeadLetterReplay
from laredo_fanout.application.rebuild import FanoutRebuildTarget
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.snapshots import TableSnapshots
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.application.targets import FanoutTargets
from laredo_fanout.config import FanoutConfig, read_fanout_config
from laredo_fanout.entrypoints.grpc.servicer import SERVICE_NAMES, ReplicationServicer, generic_handlers
from laredo_fanout.ports import ChangeFeed, Clock, FeedSubscription, Observer, SnapshotStore

log = logging.getLogger(__name__)

SERVICE_NAME = "laredo-fanout"
STOP_GRACE = 2.0  # seconds in-flight calls get once draining is over (or when there is no drain_grace)
FINAL_SNAPSHOT_TIMEOUT = 30.0
JOURNAL_AGE_CHECK = 1.0  # seconds between age-pruning passes when no change arrives
LOAD_WITHOUT_COLLECTOR = 600.0  # seconds the cyclic garbage collector may stay off while tables load


@dataclass
class FanoutApp:
    """The wired service. run(stop) serves until `stop` is set; grpc_port is known once started."""

    config: FanoutConfig
    targets: FanoutTargets
    replicator: Replicator
    feed: ChangeFeed
    clock: Clock
    tracer_provider: TracerProvider | None
    coordinator: FanoutCoordinator | None = None
    sink: GatedSink | None = None  # in front of the replicator: holds a table's messages while a rebuild installs
    dead_letters: DeadLetterWiring | None = None  # stores what cannot be applied, in the background
    front_door: FrontDoorSettings | None = None  # None: grpcio serves the port itself
    metrics: MetricsEndpoint | None = None  # GET /metrics on the health port
    grpc_port: int = 0
    health_port: int = 0
    takes_snapshots: bool = True  # periodic and final ones (False: another worker of the service takes them)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False
    _collector_was_on: bool = True

    def readiness(self) -> tuple[bool, dict[str, object]]:
        ready, details = self.targets.readiness()
        if self._stopping:
            return False, {"stopping": True, **details}
        if not self.grpc_port:  # its port (the front door) does not answer yet: clients would be refused
            return False, {"grpc": "starting", **details}
        return ready, details

    async def run(self, stop: asyncio.Event) -> None:
        """Shutdown order (start-up's reverse): unready + GoAway (drain_grace), stop gRPC, dead letters flushed,
        background loops, final snapshots, feed, health."""
        self._collector_was_on = gc.isenabled()
        gc.disable()  # until the state is loaded (see _freeze_loaded_state)
        async with ServiceRun("fan-out", self._unready) as run:
            if self.tracer_provider is not None:
                run.on_stop(self.tracer_provider.force_flush)
            run.on_stop(self._collector_back)
            health = await run.listen("fanout.health_host/fanout.health_port", HealthServer(
                self.config.endpoint.health_host, self.config.endpoint.health_port, ready=self.readiness,
                tls=self.front_door.tls if self.front_door else None, metrics=self.metrics).start(), HealthServer.stop)
            self.health_port = health.port
            subscriptions = await self._restore()
            feed = run.spawn(self.feed.run(subscriptions, self.sink or self.replicator), "fanout-feed")
            if self.takes_snapshots:
                run.on_stop(self._final_snapshots)
            self._background(run)
            if self.dead_letters is not None:
                run.on_stop(self.dead_letters.flush)  # before the final snapshots move past their messages
            grpc_server = await run.listen("fanout.grpc.host/fanout.grpc.port", start_grpc_server(
                self.config.endpoint.grpc_host, self.config.endpoint.grpc_port, (),
                generic_handlers=generic_handlers(ReplicationServicer(self.targets)),
                extra_service_names=SERVICE_NAMES, front_door=self.front_door, name="fanout",
            ), partial(GrpcServer.stop, grace=STOP_GRACE))
            self.grpc_port = grpc_server.port
            run.on_stop(self._drain_on_stop)
            self.started.set()
            await until_stopped_or_failed(stop, feed)

    def _unready(self) -> None:
        self._stopping = True

    def _collector_back(self) -> None:
        if self._collector_was_on:
            gc.enable()

    async def _restore(self) -> list[FeedSubscription]:
        """Each target with a snapshot store starts from its newest snapshot and consumes the stream after it."""
        for snapshots in self.targets.snapshots.values():
            if snapshots.policy.restore_on_start:
                await snapshots.restore_newest()  # the replica's stream_sequence becomes the snapshot's
        return [FeedSubscription(r.source_id, r.table, r.stream_sequence) for r in self.targets.replicas]

    def _background(self, run: ServiceRun) -> None:
        for snapshots in self.targets.snapshots.values() if self.takes_snapshots else ():
            run.spawn(snapshots.run(), f"snapshots:{snapshots.table}")
        run.spawn(self._prune_journals_by_age(), "journal-age")
        run.spawn(self._freeze_loaded_state(), "gc-freeze")
        if self.coordinator is not None:
            run.spawn(self.coordinator.run(), "coordination")
        if self.dead_letters is not None:
            run.spawn(self.dead_letters.run(), "dead-letters")

    async def _freeze_loaded_state(self) -> None:
        """Once every table is loaded, keep its millions of objects out of the cyclic collector's passes. A full
        collection walks every tracked object: with a million rows it stalls the loop for a large part of a second,
        again and again as changes allocate; while loading, collections cost a fifth of the time. Rows hold no
        reference cycles (refcounting frees replaced rows), so the collector is off while loading (at most
        LOAD_WITHOUT_COLLECTOR), then what exists is collected once and exempted."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LOAD_WITHOUT_COLLECTOR):
                await asyncio.gather(*(r.wait_ready() for r in self.targets.replicas))
        gc.collect()
        gc.freeze()
        if self._collector_was_on:
            gc.enable()
        log.info("state loaded; %d objects exempted from garbage collection passes", gc.get_freeze_count())

    async def _prune_journals_by_age(self) -> None:
        """Appends prune too; this pass covers quiet tables, whose entries would otherwise outlive max_age."""
        while True:
            await asyncio.sleep(JOURNAL_AGE_CHECK)  # a timer, not a hot path
            now = self.clock.now()
            for replica in self.targets.replicas:
                replica.journal.prune(now)

    async def _drain_on_stop(self) -> None:
        grace = self.config.endpoint.drain_grace
        if grace <= 0 or not self.started.is_set():
            return
        log.info("stopping: draining clients for up to %.1fs", grace)
        self.targets.drain("", "", "draining", self.clock.now() + grace)  # GoAway; streams end after the grace
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.targets.wait_clients_gone()

    async def _final_snapshots(self) -> None:
        """A snapshot at shutdown makes the next start resume right here."""
        for snapshots in self.targets.snapshots.values():
            try:
                async with asyncio.timeout(FINAL_SNAPSHOT_TIMEOUT):
                    await snapshots.take()
            except Exception as exc:  # noqa: BLE001 - shutting down: log and go on
                log.warning("%s: no final snapshot (%s: %s)", snapshots.table, type(exc).__name__, exc)


def build(settings: LaredoSettings, *, feed: ChangeFeed | None = None, tracer_provider: TracerProvider | None = None,
          clock: Clock | None = None, observer: Observer | None = None, snapshot_store: SnapshotStore | None = None,
          coordination: CoordinationStore | None = None, drain_grace: str | None = None,
          instance_id: str = "", stream_tail: StreamTail | None = None,
          dead_letter_store: DeadLetterStore | None = None, takes_snapshots: bool = True) -> FanoutApp:
    """Wire the service from settings; the keyword arguments replace real adapters (tests, embedding).

    snapshot_store replaces the store of every target with a snapshot section; coordination defaults to Redis when
    the file has a redis section; stream_tail (what restores and replays read) to JetStream, or the memory feed's
    messages for a MemoryChangeFeed; dead_letter_store replaces the JetStream dead-letter store (when
    dead_letters.enabled). takes_snapshots=False leaves periodic and final snapshots to another process (worker 0 of
    --workers); this one still restores, lists, fetches and takes snapshots on demand."""
    config = read_fanout_config(settings, drain_grace=drain_grace)
    clock = clock or SystemClock()
    encoder = ProtobufSyncEncoder()
    if observer is None and tracer_provider is None and settings.telemetry.exporter == "none":
        observer = SilentObserver()  # spans nobody exports cost more than everything else of a send
    if observer is None:
        tracer_provider = tracer_provider or build_tracer_provider(settings.telemetry, SERVICE_NAME)
        observer = OtelObserver(tracer_provider)
    replicas = [TableReplica(t.source_id, t.table, t.limits, encoder) for t in config.targets]
    stores = SnapshotStores()  # one store per distinct configuration, shared by the targets that name it
    snapshots = {r.table: TableSnapshots(r, snapshot_store or stores.store_for(t.snapshot.store), t.snapshot,
                                         encoder=encoder, clock=clock)
                 for r, t in zip(replicas, config.targets) if t.snapshot is not None}
    instance_id = instance_id or config.endpoint.instance_id or default_instance_id(SERVICE_NAME)
    targets = FanoutTargets(replicas, encoder=encoder, clock=clock, observer=observer, snapshots=snapshots,
                            instance_id=instance_id)
    replicator = Replicator({r.table: r for r in replicas}, encoder, clock, observer)
    feed = feed or NatsChangeFeed(config.nats_urls, config.subject_prefix, json_values=True,
                                  client_name="laredo-fanout")
    if coordination is None and "redis" in settings.raw:
        from laredo_core.coordination.redis_store import RedisCoordinationStore  # connects lazily

        coordination = RedisCoordinationStore(settings.redis.url, settings.redis.key_prefix)
    sink = GatedSink(replicator)
    rebuilds = _rebuilds(config, instance_id, targets, encoder, clock, sink, coordination, feed, stream_tail)
    dead_letters = wire_dead_letters(settings, TARGET_TYPE, f"fanout:{instance_id}", store=dead_letter_store)
    replicator.dead_letters, targets.dead_letter_stats = dead_letters.recorder, dead_letters.stats
    targets.feed_stalls = getattr(feed, "stalled", None)  # a FeedHealth feed reports tables that stand still
    replay = FanoutDeadLetterReplay({r.table: r for r in replicas}, encoder, clock, partial(
        decode_batch, json_values=True)) if dead_letters.enabled else None
    coordinator = FanoutCoordinator(coordination, instance_id, targets, clock,
                                    heartbeat_interval=config.status_interval, rebuilds=rebuilds,
                                    dead_letter_replay=replay) if coordination is not None else None
    metrics = MetricsEndpoint()
    observe(build_meter_provider(settings.telemetry, SERVICE_NAME, metrics=metrics).get_meter("laredo_fanout"),
            fanout_figures(targets))
    return FanoutApp(config, targets, replicator, feed, clock, tracer_provider, coordinator, sink=sink,
                     dead_letters=dead_letters, front_door=settings.front_door, metrics=metrics,
                     takes_snapshots=takes_snapshots)


def _rebuilds(config: FanoutConfig, instance_id: str, targets: FanoutTargets, encoder: ProtobufSyncEncoder,
              clock: Clock, sink: GatedSink, coordination: CoordinationStore | None, feed: ChangeFeed,
              tail: StreamTail | None) -> InstanceRebuilds | None:
    """Restores and replays (OAM commands) of this instance's tables, from their own snapshot stores."""
    if tail is None and isinstance(feed, MemoryChangeFeed):
        tail = MemoryStreamTail(feed, json_values=True)
    elif tail is None and isinstance(feed, NatsChangeFeed):
        tail = NatsStreamTail(config.nats_urls, config.subject_prefix, json_values=True,
                              client_name="laredo-fanout-rebuild")
    if tail is None or coordination is None:
        return None
    rebuild_targets = {r.table: FanoutRebuildTarget(r, encoder, clock, SilentObserver()) for r in targets.replicas}
    stores = {table: snapshots.store for table, snapshots in targets.snapshots.items()}
    return InstanceRebuilds(SERVICE_NAME.removeprefix("laredo-"), instance_id, rebuild_targets, stores.get, tail,
                            sink, coordination=coordination)


def _add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--drain-grace", metavar="DURATION", default=None,
                        help="on SIGTERM: become unready, send GoAway, serve clients up to this long, then stop "
                             "(e.g. 15s; overrides fanout.drain_grace)")


async def _main(settings: LaredoSettings, args: argparse.Namespace, stop: asyncio.Event) -> None:
    worker = getattr(args, "worker_index", None)
    app = build(settings, drain_grace=args.drain_grace, takes_snapshots=not worker)
    if worker and app.targets.snapshots:
        log.info("periodic and final snapshots are worker 0's: the workers share their stores")
    tables = ", ".join(str(t.table) for t in app.config.targets)
    log.info("fan-out for %s; NATS %s; drain grace %.1fs", tables, ", ".join(app.config.nats_urls),
             app.config.endpoint.drain_grace)
    await app.run(stop)


def cli(argv: list[str] | None = None) -> int:
    return run_service(SERVICE_NAME, "Laredo fan-out: table state + change journal served over gRPC Sync.",
                       _main, argv, extend=_add_flags,
                       validate=lambda settings, args: read_fanout_config(settings, drain_grace=args.drain_grace),
                       stop_grace=_stop_grace, workers="fanout")


def _stop_grace(settings: LaredoSettings, args: argparse.Namespace) -> float:
    """Draining clients comes first: the stop watchdog's grace starts after drain_grace."""
    return read_fanout_config(settings, drain_grace=args.drain_grace).endpoint.drain_grace + STOP_GRACE_AFTER_DRAIN


if __name__ == "__main__":
    raise SystemExit(cli())
