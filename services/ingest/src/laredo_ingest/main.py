"""Composition root: settings in, adapters built, the ingest service run; nothing connects at import or build."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from laredo_core.cli import run_service
from laredo_core.coordination.ids import default_instance_id
from laredo_core.coordination.ports import CoordinationStore
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_core.config import LaredoSettings
from laredo_core.deadletters.config import read_dead_letter_settings
from laredo_core.deadletters.nats_store import dead_letter_stream_config, stream_spec_from_settings
from laredo_core.health import HealthServer
from laredo_core.metrics import MetricsEndpoint
from laredo_core.runtime import ServiceRun
from laredo_core.shutdown import close_quietly
from laredo_core.telemetry import build_meter_provider, build_tracer_provider

from laredo_ingest.adapters.keyless_dead_letters import KeylessDeadLetters
from laredo_ingest.adapters.nats_change_publisher import NatsChangePublisher
from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.adapters.nats_state_store import DEFAULT_BUCKET, NatsKvStateStore
from laredo_ingest.adapters.otel_observer import OtelObserver
from laredo_ingest.adapters.psycopg_replication_stream import PsycopgReplicationStream
from laredo_ingest.adapters.psycopg_source_database import PsycopgSourceDatabase
from laredo_ingest.application.control import IngestControl
from laredo_ingest.application.coordination import IngestCoordinator
from laredo_ingest.application.ingest_service import IngestService
from laredo_ingest.application.status import IngestStatus
from laredo_ingest.config import coordination_settings, ingest_options
from laredo_ingest.entrypoints.health import build_health_server
from laredo_ingest.ports import IngestPorts

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class IngestApp:
    """One source's ingest: run(stop) until stop is set; status and counters are readable at any time."""

    service: IngestService
    health: HealthServer
    nats: NatsConnection
    publisher: NatsChangePublisher
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    coordinator: IngestCoordinator | None = None
    coordination_store: Any = None

    @property
    def status(self) -> IngestStatus:
        return self.service.status

    @property
    def control(self) -> IngestControl:
        """Operator requests: reload, pause, resume, reset (what coordination commands call)."""
        return self.service.control

    @property
    def confirmed_lsn(self) -> int:
        return self.service.status.confirmed_lsn

    @property
    def health_port(self) -> int:
        return self.health.port

    async def run(self, stop: asyncio.Event) -> None:
        """Health first (live at once, ready once streaming), then the service; shutdown in reverse."""
        async with ServiceRun("ingest") as run:
            run.on_stop(self.meter_provider.force_flush)
            run.on_stop(self.tracer_provider.force_flush)
            await run.listen("ingest.health_host/ingest.health_port", self.health.start(), HealthServer.stop)
            if self.coordination_store is not None and hasattr(self.coordination_store, "aclose"):
                run.on_stop(close_quietly, "the coordination store", self.coordination_store.aclose)
            run.on_stop(close_quietly, "the NATS connection", self.nats.close)
            run.on_stop(close_quietly, "the change publisher", self.publisher.close)
            if self.coordinator is not None:
                await self.coordinator.run(stop, self.service.run)
            else:
                await self.service.run(stop)


def build(settings: LaredoSettings, *, source_id: str | None = None, tracer_provider: TracerProvider | None = None,
          span_exporter: SpanExporter | None = None, metric_reader: MetricReader | None = None,
          state_bucket: str = DEFAULT_BUCKET, ack_timeout: float = 10.0,
          coordination_store: CoordinationStore | None = None) -> IngestApp:
    """The app for one source; coordination_store overrides the Redis store (tests: the in-memory one)."""
    options = ingest_options(settings, source_id)
    source = settings.sources[options.source_id]
    # A permanent slot admits one walsender at a time, so it fences a second leader: hold through Redis outages.
    coordination = dataclasses.replace(coordination_settings(settings),
                                       hold_lease_through_outage=source.slot_mode == "stateful")
    provider = tracer_provider or build_tracer_provider(settings.telemetry, "laredo-ingest", exporter=span_exporter)
    metrics = MetricsEndpoint()
    meter_provider = build_meter_provider(settings.telemetry, "laredo-ingest", reader=metric_reader, metrics=metrics)
    nats = NatsConnection(settings.stream.nats_urls, name=f"laredo-ingest-{options.source_id}")
    publisher = NatsChangePublisher(nats, max_pending=settings.stream.max_pending_acks, ack_timeout=ack_timeout,
                                    **_keyless_dead_letters(settings, options.source_id))
    ports = IngestPorts(
        database=lambda: PsycopgSourceDatabase(source.connection),
        replication=lambda: PsycopgReplicationStream(source.connection),
        publisher=publisher,
        state=NatsKvStateStore(nats, bucket=state_bucket, replicas=settings.stream.replicas),
        observer=OtelObserver(provider, meter_provider, tracing=bool(
            tracer_provider or span_exporter or settings.telemetry.exporter != "none")),
        message_limit=nats,
    )
    status = IngestStatus(is_leader=not coordination.leader_election)
    ports.observer.gauges(status.gauges)
    ports.observer.gauges(lambda: {"publish_acks_total": float(publisher.acks),
                                   "publish_ack_seconds_total": publisher.ack_seconds})
    service = IngestService(options, ports, status)
    health = build_health_server(settings.ingest.health_host, settings.ingest.health_port, status,
                                 tls=settings.front_door.tls, metrics=metrics)
    coordinator, store = None, None
    if coordination.enabled:
        store = coordination_store or RedisCoordinationStore(settings.redis.url, settings.redis.key_prefix)
        instance_id = settings.ingest.instance_id or default_instance_id("ingest")
        coordinator = IngestCoordinator(store, coordination, source_id=options.source_id, instance_id=instance_id,
                                        status=status, control=service.control)
        log.info("ingest instance %s: leader election %s, commands %s, heartbeats %s", instance_id,
                 *("on" if flag else "off" for flag in (coordination.leader_election, coordination.commands,
                                                        coordination.heartbeats)))
    return IngestApp(service, health, nats, publisher, provider, meter_provider, coordinator,
                     store if coordination_store is None else None)


def _keyless_dead_letters(settings: LaredoSettings, source_id: str) -> dict[str, Any]:
    """Tables without a usable key go to the dead letters of their pipelines (unless dead letters are off)."""
    dead_letters = read_dead_letter_settings(settings)
    if not dead_letters.enabled:
        return {}
    targets = {t.table: tuple(g.type for g in t.targets) for t in settings.tables if t.source_id == source_id}
    return {"dead_letters": KeylessDeadLetters(dead_letters.subject_prefix, source_id, targets),
            "dead_letter_stream": dead_letter_stream_config(dead_letters.subject_prefix,
                                                            stream_spec_from_settings(dead_letters))}


def cli(argv: list[str] | None = None) -> int:
    def extend(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--source", default=None, metavar="ID",
                            help="the source to ingest when several are configured")

    async def main(settings: LaredoSettings, args: argparse.Namespace, stop: asyncio.Event) -> None:
        await build(settings, source_id=args.source).run(stop)

    return run_service("laredo-ingest", "Stream PostgreSQL changes of one source into NATS JetStream.", main,
                       argv, extend, validate=_validate)


def _validate(settings: LaredoSettings, args: argparse.Namespace) -> None:
    """The chosen source, or every source when none is chosen (a file may serve several ingest processes)."""
    for source_id in [args.source] if args.source else list(settings.sources) or [None]:
        ingest_options(settings, source_id)
    coordination_settings(settings)
