"""Observer on OpenTelemetry: spans from the use cases, with their W3C context for message headers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Tracer

from laredo_core.telemetry import inject_headers


class _OtelSpan:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, value)

    def trace_headers(self) -> dict[str, str]:
        return inject_headers(trace.set_span_in_context(self._span))


class OtelObserver:
    def __init__(self, tracer_provider: trace.TracerProvider) -> None:
        self._tracer: Tracer = tracer_provider.get_tracer("laredo_ingest")

    @contextlib.contextmanager
    def span(self, name: str, attributes: Mapping[str, Any]) -> Iterator[_OtelSpan]:
        with self._tracer.start_as_current_span(name, attributes=dict(attributes)) as span:
            yield _OtelSpan(span)
