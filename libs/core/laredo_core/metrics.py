"""Prometheus /metrics on every service's health port: the service's OpenTelemetry instruments, scraped.

Each service keeps one registry of its own (not prometheus_client's process-wide one, so services sharing a
process never mix their figures). The instruments are mostly observable: a scrape reads the figures the
service keeps anyway, so its hot paths pay nothing for being measured.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest

from laredo_kernel.table_replay import AppliedCounts

log = logging.getLogger(__name__)

ACTIONS = ("inserts", "updates", "deletes", "truncates")  # the counts of AppliedCounts, by action
REFRESH_TIMEOUT = 5.0  # seconds a refresh may take before a scrape answers without it

#: One figure: its value and its labels (e.g. {"table": "public.items"}).
Sample = tuple[float, Mapping[str, str]]


@dataclass
class MetricsEndpoint:
    """What GET /metrics answers: the registry a service's PrometheusMetricReader fills at each scrape."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    reader: PrometheusMetricReader = field(init=False)
    content_type: str = CONTENT_TYPE_LATEST
    #: Awaited before each scrape, for figures read from elsewhere (OAM: the coordination store).
    refresh: Callable[[], Awaitable[None]] | None = None

    def __post_init__(self) -> None:
        ProcessCollector(registry=self.registry)
        self.reader = PrometheusMetricReader(registry=self.registry)

    async def scrape(self) -> bytes:
        if self.refresh is not None:
            try:
                async with asyncio.timeout(REFRESH_TIMEOUT):
                    await self.refresh()
            except Exception as exc:  # noqa: BLE001 - the figures kept from before are scraped instead
                log.warning("metrics: refreshing failed (%s: %s); serving the figures read before",
                            type(exc).__name__, exc)
        return generate_latest(self.registry)


@dataclass(frozen=True)
class Figure:
    """An observable instrument: `read()` gives its samples at each collection."""

    name: str
    description: str
    read: Callable[[], Iterable[Sample]]
    counter: bool = False  # only ever grows (Prometheus: a counter, `_total`); otherwise a gauge


def observe(meter: Meter, figures: Iterable[Figure]) -> None:
    """Register each figure as an observable gauge or counter of `meter`."""
    for figure in figures:
        create = meter.create_observable_counter if figure.counter else meter.create_observable_gauge
        create(figure.name, callbacks=[_callback(figure)], description=figure.description)


def _callback(figure: Figure) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def collect(_: CallbackOptions) -> Iterable[Observation]:
        try:
            return [Observation(value, dict(labels)) for value, labels in figure.read()]
        except Exception:  # noqa: BLE001 - a scrape must never break the service, nor the other figures
            log.warning("metric %s could not be read", figure.name, exc_info=True)
            return []

    return collect


def applied_by_action(tables: Iterable[tuple[object, AppliedCounts]]) -> list[Sample]:
    """Each table's changes applied (laredo_kernel.table_replay.AppliedCounts), labelled by table and action."""
    return [(float(getattr(counts, action)), {"table": str(table), "action": action})
            for table, counts in tables for action in ACTIONS]


def per_table(items: Iterable[tuple[object, float]], **labels: str) -> list[Sample]:
    """Samples labelled by table: [(table, value), ...] -> [(value, {"table": "schema.name", **labels}), ...]."""
    return [(float(value), {"table": str(table), **labels}) for table, value in items]
