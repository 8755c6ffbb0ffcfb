"""Composition root of the query service: settings in, adapters built, servers run; nothing connects at import."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from grpc_health.v1 import health_pb2

from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings, ServiceEndpoint
from laredo_core.errors import LaredoError
from laredo_core.grpc_server import GrpcServer, start_grpc_server
from laredo_core.health import HealthServer
from laredo_core.stream.nats_feed import NatsChangeFeed

from laredo_query.adapters.system_clock import SystemClock
from laredo_query.application.applier import ChangeApplier
from laredo_query.application.queries import QueryService
from laredo_query.application.query_table import QueryTable, ReadinessSignal
from laredo_query.application.subscriptions import SubscriberHub
from laredo_query.config import QueryConfig, read_query_config
from laredo_query.domain.errors import ServiceStopping
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.entrypoints.grpc.servicer import QUERY_SERVICE_NAMES, QueryServicer, generic_handlers
from laredo_query.ports import ChangeFeed, Clock, FeedSubscription

log = logging.getLogger(__name__)

SERVICE_NAME = "laredo-query"
STOP_GRACE = 2.0  # seconds in-flight calls get when no drain_grace is configured
_SERVING, _NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class QueryApp:
    """The wired service. run(stop) serves until `stop` is set; ports are known once `started` is set.

    Readiness (HTTP /health/ready and gRPC health for "", both service names and each "schema.table"):
    every table loaded (baseline complete, caught up), its indexes fitting its columns, not stale.
    """

    config: QueryConfig
    service: QueryService
    applier: ChangeApplier
    feed: ChangeFeed
    signal: ReadinessSignal
    clock: Clock
    grpc_port: int = 0
    health_port: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False

    @property
    def endpoint(self) -> ServiceEndpoint:
        return self.config.endpoint

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        ready, details = self.service.readiness()
        if self._stopping:
            return False, {"stopping": True, **details}
        return ready, details

    async def run(self, stop: asyncio.Event) -> None:
        """Shutdown order: unready, end subscriptions, stop gRPC (grace), stop the feed, stop health."""
        endpoint = self.endpoint
        health = HealthServer(endpoint.health_host, endpoint.health_port, ready=self.readiness)
        grpc_server: GrpcServer | None = None
        feed = asyncio.create_task(self.feed.run(self._subscriptions(), self.applier), name="query-feed")
        mirror: asyncio.Task[None] | None = None
        try:
            await _listen("query.health_host/query.health_port", health.start())
            self.health_port = health.port
            grpc_server = await _listen("query.grpc.host/query.grpc.port", start_grpc_server(
                endpoint.grpc_host, endpoint.grpc_port, (),
                generic_handlers=generic_handlers(QueryServicer(self.service, self.clock)),
                extra_service_names=QUERY_SERVICE_NAMES))
            self.grpc_port = grpc_server.port
            await self._mirror_readiness(grpc_server)
            mirror = asyncio.create_task(self._keep_mirroring(grpc_server), name="query-readiness")
            self.started.set()
            log.info("query service on gRPC port %d, health port %d, serving %s", self.grpc_port,
                     self.health_port, ", ".join(t.name for t in self.service.tables) or "no table")
            await _until_stopped_or_failed(stop, feed)
        finally:
            self._stopping = True
            if mirror is not None:
                mirror.cancel()
            self.service.end_subscriptions(ServiceStopping(
                "the query service is shutting down; subscribe again (another instance, or this one after "
                "its restart)"))
            if grpc_server is not None:
                await grpc_server.set_serving(False)
                for table in self.service.tables:
                    await grpc_server.health.set(table.name, _NOT_SERVING)
                await grpc_server.stop(endpoint.drain_grace or STOP_GRACE)
            feed.cancel()
            await asyncio.gather(feed, *([mirror] if mirror else []), return_exceptions=True)
            await health.stop()

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


async def _listen(keys: str, starting: Any) -> Any:
    try:
        return await starting
    except OSError as exc:
        raise LaredoError(f"query service cannot listen: {exc}; choose a free port with {keys} "
                          "(0 picks one)") from exc


def build(settings: LaredoSettings, *, feed: ChangeFeed | None = None, clock: Clock | None = None,
          **endpoint_overrides: Any) -> QueryApp:
    """Wire the service from settings. `feed`/`clock` replace real adapters; `endpoint_overrides` replace
    fields of settings.query (grpc_port=0, health_host=..., drain_grace=...)."""
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
    feed = feed or NatsChangeFeed(config.nats_urls, config.subject_prefix, json_values=False,
                                  client_name="laredo-query")
    return QueryApp(config, QueryService(tables), applier, feed, signal, clock)


async def _main(settings: LaredoSettings, _: argparse.Namespace, stop: asyncio.Event) -> None:
    await build(settings).run(stop)


def cli(argv: list[str] | None = None) -> int:
    return run_service(SERVICE_NAME, "Laredo query: indexed in-memory tables served over gRPC TableSyncQuery.",
                       _main, argv, validate=lambda settings, _: read_query_config(settings))


if __name__ == "__main__":
    raise SystemExit(cli())
