"""Composition root of the OAM service: settings in, a gRPC server and HTTP health endpoints out."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
from functools import partial
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings, ServiceEndpoint
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_core.frontdoor.envoy_config import Upstream
from laredo_core.frontdoor.settings import FrontDoorSettings
from laredo_core.grpc_server import GrpcServer, ServiceRegistration, start_grpc_server
from laredo_core.deadletters.config import read_dead_letter_settings
from laredo_core.deadletters.nats_store import store_from_settings
from laredo_core.health import HealthServer
from laredo_core.metrics import MetricsEndpoint, observe
from laredo_core.runtime import ServiceRun
from laredo_core.snapshots.factory import SnapshotStores
from laredo_core.snapshots.store import SnapshotStore
from laredo_core.telemetry import build_meter_provider

from laredo_oam.adapters.envoy_query_routes import EnvoyQueryRoutes
from laredo_oam.adapters.metrics import SystemFigures
from laredo_oam.adapters.nats_change_tail import NatsChangeTail
from laredo_oam.application.administration import Administration
from laredo_oam.application.dead_letters import DeadLetters
from laredo_oam.application.query_routing import QueryRouting
from laredo_oam.application.replay import Rebuilds
from laredo_oam.application.snapshots import SnapshotPlace, Snapshots
from laredo_oam.application.status_view import StatusView
from laredo_oam.application.status_watch import StatusWatch
from laredo_oam.config import OamConfig, QueryRoutingConfig, read_oam_config
from laredo_oam.entrypoints.console.server import ConsoleServer
from laredo_oam.entrypoints.grpc.servicer import OamServicer, oam_registration
from laredo_oam.ports import ChangeTail, CoordinationStore, DeadLetterStore

log = logging.getLogger(__name__)


class App:
    """The OAM service: gRPC (OAM RPCs, health, reflection) and /health/{live,ready}.

    `grpc_port` and `health_port` are the bound ports once `started` is set (port 0 picks free ones).
    Ready from the moment the gRPC server serves until shutdown begins.
    """

    def __init__(self, endpoint: ServiceEndpoint, registration: ServiceRegistration,
                 closers: Sequence[Callable[[], Awaitable[None]]], *, watch: StatusWatch,
                 front_door: FrontDoorSettings, store: CoordinationStore, query_routing: QueryRoutingConfig,
                 metrics: MetricsEndpoint) -> None:
        self.endpoint = endpoint
        self.front_door = front_door
        self._store = store
        self._query_routing = query_routing  # the OAM address also answers Query (through the front door)
        self.routing: QueryRouting | None = None
        self._closers = closers  # the clients build() made (stores), closed last
        self.watch = watch  # WatchStatus: ended before the gRPC server stops, so open streams do not hold it
        self.started = asyncio.Event()
        self._registration = registration
        self._grpc: GrpcServer | None = None
        self._stopping = False
        self.health = HealthServer(endpoint.health_host, endpoint.health_port, ready=self._readiness,
                                   tls=front_door.tls, metrics=metrics)

    @property
    def grpc_port(self) -> int:
        return self._grpc.port if self._grpc else 0

    @property
    def health_port(self) -> int:
        return self.health.port

    def _readiness(self) -> tuple[bool, dict[str, Any]]:
        serving = self._grpc is not None and not self._stopping
        return serving, {"grpc": "serving" if serving else "not serving"}

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set; then (start-up's reverse) unready, end watches, stop gRPC (drain_grace),
        stop health, close the stores."""
        async with ServiceRun("OAM service", self._unready) as run:
            for close in self._closers:
                run.on_stop(close)
            routes = self._routes()
            if routes is not None:
                run.on_stop(routes[0].close)
            await run.listen("oam.health_host/oam.health_port", self.health.start(), HealthServer.stop)
            self._grpc = await run.listen("oam.grpc.host/oam.grpc.port", start_grpc_server(
                self.endpoint.grpc_host, self.endpoint.grpc_port, [self._registration],
                front_door=self.front_door, name="oam", upstreams=[routes[1]] if routes else (), console=True),
                partial(GrpcServer.stop, grace=self.endpoint.drain_grace))
            door = self._grpc.front_door
            if door is not None and door.console_socket:
                await run.listen("oam.grpc.port", ConsoleServer(
                    door.console_socket, self.front_door.auth,
                    trust_client_cert_header=bool(self.front_door.tls.client_ca)).start(), ConsoleServer.stop)
            run.on_stop(self._unserve, self._grpc)
            if routes is not None:
                self.routing = QueryRouting(self._store, routes[0], refresh=self._query_routing.refresh)
                run.spawn(self.routing.run(), "oam-query-routing")
            self.started.set()
            log.info("OAM service ready: gRPC on port %d, health on port %d", self.grpc_port, self.health_port)
            await stop.wait()

    def _unready(self) -> None:
        self._stopping = True

    async def _unserve(self, grpc: GrpcServer) -> None:
        await grpc.set_serving(False)
        await self.watch.aclose()  # open WatchStatus streams would hold the server's stop

    def _routes(self) -> tuple[EnvoyQueryRoutes, Upstream] | None:
        """The front door's query endpoints, when OAM answers Query too (it takes the front door)."""
        if not self._query_routing.enabled:
            return None
        if not self.front_door.enabled:
            log.warning("oam.query_routing needs the front door (front_door.enabled = true): the OAM address "
                        "does not answer Query; call query instances directly")
            return None
        config, routes = self._query_routing, EnvoyQueryRoutes()
        return routes, routes.upstream(tls_ca=config.tls_ca, tls_cert=config.tls_cert, tls_key=config.tls_key,
                                       tls_server_name=config.tls_server_name)


def build(settings: LaredoSettings, *, store: CoordinationStore | None = None,
          command_timeout: float | None = None, snapshot_store: SnapshotStore | None = None,
          change_tail: ChangeTail | None = None, dead_letter_store: DeadLetterStore | None = None,
          **overrides: Any) -> App:
    """The app from settings; `overrides` replace fields of settings.oam (grpc_port=0, health_host=...).

    The other arguments replace what settings would give (tests pass in-memory ones): the Redis coordination
    store, oam.command_timeout, every table's snapshot store, WatchStatus's JetStream change tail and the
    JetStream dead-letter store (used while dead_letters.enabled). Nothing connects here.
    """
    unknown = set(overrides) - {f.name for f in dataclasses.fields(ServiceEndpoint)}
    if unknown:
        raise TypeError(f"build() got unknown overrides {sorted(unknown)}; expected fields of ServiceEndpoint")
    config = read_oam_config(settings)
    endpoint = dataclasses.replace(settings.oam, **overrides)
    closers: list[Callable[[], Awaitable[None]]] = []
    if store is None:
        store = redis_store = RedisCoordinationStore(config.redis_url, config.redis_key_prefix)
        closers.append(redis_store.aclose)
    timeout = command_timeout or config.command_timeout
    admin = Administration(store, config.catalog, command_timeout=timeout)
    snapshots = Snapshots(_snapshot_places(config, snapshot_store), config.catalog, store, command_timeout=timeout)
    watch = StatusWatch(store, config.catalog,
                        change_tail or NatsChangeTail(config.nats_urls, config.subject_prefix))
    dead_letters = DeadLetters(config.catalog, _dead_letter_store(settings, dead_letter_store, closers), store,
                               command_timeout=timeout)
    view = StatusView(store, config.catalog)
    figures = SystemFigures(view)
    metrics = MetricsEndpoint(refresh=figures.refresh)
    observe(build_meter_provider(settings.telemetry, "laredo-oam", metrics=metrics).get_meter("laredo_oam"),
            figures.figures())
    servicer = OamServicer(view, admin, snapshots=snapshots, watch=watch, dead_letters=dead_letters,
                           rebuilds=Rebuilds(store, snapshots, config.catalog, command_timeout=timeout))
    return App(endpoint, oam_registration(servicer), closers, watch=watch, front_door=settings.front_door,
               store=store, query_routing=config.query_routing, metrics=metrics)


def _dead_letter_store(settings: LaredoSettings, override: DeadLetterStore | None,
                       closers: list[Callable[[], Awaitable[None]]]) -> DeadLetterStore | None:
    """The dead-letter store (None when dead_letters.enabled is false); one built here joins `closers`."""
    dead_letters = read_dead_letter_settings(settings)
    if not dead_letters.enabled or override is not None:
        return override if dead_letters.enabled else None
    built = store_from_settings(dead_letters, client_name="laredo-oam")
    assert built is not None
    closers.append(built.close)
    return built


def _snapshot_places(config: OamConfig, override: SnapshotStore | None) -> dict[TableId, SnapshotPlace]:
    """Each table's snapshot store, one adapter per distinct store configuration."""
    stores = SnapshotStores()
    return {table: SnapshotPlace(override, "memory", "memory") if override is not None
            else SnapshotPlace(stores.store_for(store), store.kind, store.location)
            for table, store in config.snapshot_stores.items()}


async def _serve(settings: LaredoSettings, _: argparse.Namespace, stop: asyncio.Event) -> None:
    await build(settings).run(stop)


def cli() -> None:
    sys.exit(run_service("laredo-oam", "Laredo OAM service: status and administration through the coordination "
                         "store (Redis)", _serve, validate=lambda settings, _: read_oam_config(settings)))


if __name__ == "__main__":
    cli()
