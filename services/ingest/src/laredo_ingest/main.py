"""Composition root: settings in, adapters built, the ingest service run; nothing connects at import or build."""

from __future__ import annotations

import argparse
import asyncio
import logging

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from laredo_core.cli import run_service
from laredo_core.config import LaredoSettings
from laredo_core.health import HealthServer
from laredo_core.telemetry import build_tracer_provider

from laredo_ingest.adapters.nats_change_publisher import NatsChangePublisher
from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.adapters.nats_state_store import DEFAULT_BUCKET, NatsKvStateStore
from laredo_ingest.adapters.otel_observer import OtelObserver
from laredo_ingest.adapters.psycopg_replication_stream import PsycopgReplicationStream
from laredo_ingest.adapters.psycopg_source_database import PsycopgSourceDatabase
from laredo_ingest.application.ingest_service import IngestPorts, IngestService
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.config import ingest_options
from laredo_ingest.entrypoints.health import build_health_server

log = logging.getLogger(__name__)


class IngestApp:
    """One source's ingest: run(stop) until stop is set; status and counters are readable at any time."""

    def __init__(self, service: IngestService, health: HealthServer, nats: NatsConnection,
                 publisher: NatsChangePublisher, tracer_provider: TracerProvider) -> None:
        self._service = service
        self._health = health
        self._nats = nats
        self._publisher = publisher
        self._tracer_provider = tracer_provider

    @property
    def status(self) -> IngestStatus:
        return self._service.status

    @property
    def state(self) -> IngestPhase:
        return self._service.status.phase

    @property
    def confirmed_lsn(self) -> int:
        return self._service.status.confirmed_lsn

    @property
    def published_messages(self) -> int:
        return self._service.status.published_messages

    @property
    def health_port(self) -> int:
        return self._health.port

    async def run(self, stop: asyncio.Event) -> None:
        """Health first (live at once, ready once streaming), then the service; shutdown in reverse."""
        await self._health.start()
        try:
            await self._service.run(stop)
        finally:
            await self._publisher.close()
            await self._nats.close()
            await self._health.stop()
            self._tracer_provider.force_flush()


def build(settings: LaredoSettings, *, source_id: str | None = None, tracer_provider: TracerProvider | None = None,
          span_exporter: SpanExporter | None = None, state_bucket: str = DEFAULT_BUCKET,
          ack_timeout: float = 10.0) -> IngestApp:
    options = ingest_options(settings, source_id)
    source = settings.sources[options.source_id]
    provider = tracer_provider or build_tracer_provider(settings.telemetry, "laredo-ingest", exporter=span_exporter)
    nats = NatsConnection(settings.stream.nats_urls, name=f"laredo-ingest-{options.source_id}")
    publisher = NatsChangePublisher(nats, max_pending=settings.stream.max_pending_acks, ack_timeout=ack_timeout)
    ports = IngestPorts(
        database=lambda: PsycopgSourceDatabase(source.connection),
        replication=lambda: PsycopgReplicationStream(source.connection),
        publisher=publisher,
        state=NatsKvStateStore(nats, bucket=state_bucket, replicas=settings.stream.replicas),
        observer=OtelObserver(provider),
    )
    status = IngestStatus()
    service = IngestService(options, ports, status)
    health = build_health_server(settings.ingest.health_host, settings.ingest.health_port, status)
    return IngestApp(service, health, nats, publisher, provider)


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
