"""Observer on OpenTelemetry: one span per compaction phase (ports.Observer names them), histograms prefixed
`laredo.snapshot.`; the Spark engine folds and writes in one `snapshot.fold` span, the sequential one in two."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import Histogram

PREFIX = "laredo.snapshot."


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
