"""Observer on OpenTelemetry: one span per compaction phase, histograms prefixed `laredo.snapshot.`.

Spans: `snapshot.compact` (attribute laredo.table) around `snapshot.read_tail`, `snapshot.fold` (the Spark
fold-and-write job, or the sequential fold), `snapshot.write` (sequential only), `snapshot.checksum`,
`snapshot.manifest` and `snapshot.retention`. Histograms: `laredo.snapshot.rows`,
`laredo.snapshot.duration_seconds`, `laredo.snapshot.rows_per_second`, `laredo.snapshot.failures`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from laredo_core.config import TelemetrySettings

PREFIX = "laredo.snapshot."
METRICS_EXPORT_SECONDS = 15.0


def build_meter_provider(settings: TelemetrySettings, service_name: str, *,
                         reader: MetricReader | None = None) -> MeterProvider:
    """Metrics exported like traces (telemetry.exporter: otlp, console, none); `reader` overrides (tests)."""
    readers: list[MetricReader] = []
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


class _OtelSpan:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, value)


class OtelObserver:
    def __init__(self, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider | None = None
                 ) -> None:
        self._tracer = tracer_provider.get_tracer("laredo_snapshot")
        self._meter = (meter_provider or metrics.get_meter_provider()).get_meter("laredo_snapshot")
        self._histograms: dict[str, Histogram] = {}

    @contextlib.contextmanager
    def phase(self, name: str, attributes: Mapping[str, Any]) -> Iterator[_OtelSpan]:
        with self._tracer.start_as_current_span(name, attributes=dict(attributes)) as span:
            yield _OtelSpan(span)

    def record(self, name: str, value: float, attributes: Mapping[str, str] | None = None) -> None:
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = self._meter.create_histogram(PREFIX + name)
        histogram.record(value, attributes=dict(attributes) if attributes else None)
