"""OpenTelemetry set-up from configuration, and W3C trace-context propagation through message headers."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from laredo_core.config import TelemetrySettings
from laredo_core.metrics import MetricsEndpoint

log = logging.getLogger(__name__)
_PROPAGATOR = TraceContextTextMapPropagator()


def build_tracer_provider(settings: TelemetrySettings, service_name: str, *,
                          exporter: SpanExporter | None = None) -> TracerProvider:
    """A provider exporting as configured (otlp, console, none); `exporter` overrides it (tests)."""
    provider = TracerProvider(resource=_resource(settings, service_name),
                              sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif settings.exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif settings.exporter == "otlp":
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(settings, "trace")))
    log.info("tracing for %s: exporter=%s sample_ratio=%s", service_name,
             "override" if exporter else settings.exporter, settings.sample_ratio)
    return provider


METRICS_EXPORT_SECONDS = 15.0


def build_meter_provider(settings: TelemetrySettings, service_name: str, *, reader: MetricReader | None = None,
                         metrics: MetricsEndpoint | None = None) -> MeterProvider:
    """Metrics exported like traces (telemetry.exporter: otlp, console, none); `reader` overrides (tests).
    `metrics`: the service's /metrics endpoint, which reads the same instruments whatever the exporter."""
    readers: list[MetricReader] = [metrics.reader] if metrics is not None else []
    if reader is not None:
        readers.append(reader)
    elif settings.exporter in ("otlp", "console"):
        exporter = (_otlp_exporter(settings, "metric") if settings.exporter == "otlp"
                    else ConsoleMetricExporter())
        readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=METRICS_EXPORT_SECONDS * 1000))
    return MeterProvider(resource=_resource(settings, service_name), metric_readers=readers)


def _resource(settings: TelemetrySettings, service_name: str) -> Resource:
    return Resource.create({"service.name": service_name, "service.namespace": settings.service_namespace})


def _otlp_exporter(settings: TelemetrySettings, signal: str) -> Any:
    """The OTLP exporter of `signal` (trace or metric); over HTTP it posts to <endpoint>/v1/<signal>s."""
    module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{settings.otlp_protocol}.{signal}_exporter")
    exporter = getattr(module, "OTLPSpanExporter" if signal == "trace" else "OTLPMetricExporter")
    if settings.otlp_protocol == "http":
        endpoint, suffix = settings.otlp_endpoint.rstrip("/"), f"/v1/{signal}s"
        return exporter(endpoint=endpoint if endpoint.endswith(suffix) else endpoint + suffix)
    return exporter(endpoint=settings.otlp_endpoint, insecure=settings.otlp_endpoint.startswith("http://"))


def inject_headers(ctx: otel_context.Context | None = None) -> dict[str, str]:
    """traceparent/tracestate of the given (or current) context, for a NATS message or gRPC metadata."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=ctx)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    """The remote parent carried by message headers (an empty context when there is none)."""
    return _PROPAGATOR.extract(dict(headers or {}))
