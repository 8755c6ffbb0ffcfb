"""OpenTelemetry set-up from configuration, and W3C trace-context propagation through message headers."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from laredo_core.config import TelemetrySettings
from laredo_core.metrics import MetricsEndpoint

log = logging.getLogger(__name__)
_PROPAGATOR = TraceContextTextMapPropagator()


def build_tracer_provider(settings: TelemetrySettings, service_name: str, *,
                          exporter: SpanExporter | None = None) -> TracerProvider:
    """A provider exporting as configured (otlp, console, none); `exporter` overrides it (tests)."""
    resource = Resource.create({"service.name": service_name, "service.namespace": settings.service_namespace})
    provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif settings.exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif settings.exporter == "otlp":
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(settings)))
    log.info("tracing for %s: exporter=%s sample_ratio=%s", service_name,
             "override" if exporter else settings.exporter, settings.sample_ratio)
    return provider


def _otlp_exporter(settings: TelemetrySettings) -> SpanExporter:
    if settings.otlp_protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        endpoint = settings.otlp_endpoint.rstrip("/")
        return HttpExporter(endpoint=endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces")
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    return GrpcExporter(endpoint=settings.otlp_endpoint, insecure=settings.otlp_endpoint.startswith("http://"))


METRICS_EXPORT_SECONDS = 15.0


def build_meter_provider(settings: TelemetrySettings, service_name: str, *, reader: MetricReader | None = None,
                         metrics: MetricsEndpoint | None = None) -> MeterProvider:
    """Metrics exported like traces (telemetry.exporter: otlp, console, none); `reader` overrides (tests).
    `metrics`: the service's /metrics endpoint, which reads the same instruments whatever the exporter."""
    readers: list[MetricReader] = [metrics.reader] if metrics is not None else []
    if reader is not None:
        readers.append(reader)
    elif settings.exporter == "otlp":
        readers.append(PeriodicExportingMetricReader(_otlp_metric_exporter(settings),
                                                     export_interval_millis=METRICS_EXPORT_SECONDS * 1000))
    elif settings.exporter == "console":
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(),
                                                     export_interval_millis=METRICS_EXPORT_SECONDS * 1000))
    resource = Resource.create({"service.name": service_name, "service.namespace": settings.service_namespace})
    return MeterProvider(resource=resource, metric_readers=readers)


def _otlp_metric_exporter(settings: TelemetrySettings) -> Any:
    if settings.otlp_protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter

        endpoint = settings.otlp_endpoint.rstrip("/")
        return HttpExporter(endpoint=endpoint if endpoint.endswith("/v1/metrics") else endpoint + "/v1/metrics")
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExporter

    return GrpcExporter(endpoint=settings.otlp_endpoint, insecure=settings.otlp_endpoint.startswith("http://"))


def inject_headers(ctx: otel_context.Context | None = None) -> dict[str, str]:
    """traceparent/tracestate of the given (or current) context, for a NATS message or gRPC metadata."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=ctx)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    """The remote parent carried by message headers (an empty context when there is none)."""
    return _PROPAGATOR.extract(dict(headers or {}))
