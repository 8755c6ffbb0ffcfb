"""One inserted row gives one trace: ingest.publish -> fanout.apply -> fanout.sync.send."""

from __future__ import annotations

from collections.abc import Callable

from laredo_testing.eventually import eventually
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from laredo_core.telemetry import inject_headers
from laredo_fanout.adapters.otel_observer import OtelObserver
from services.fanout.tests.conftest import World
from services.fanout.tests.fanout_testkit import insert, row


async def test_apply_and_send_spans_continue_the_publisher_trace(make_world: Callable[..., World]) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    world = make_world(observer=OtelObserver(provider))
    world.publish(world.batches.baseline([row(1)]))
    world.start()
    client, _ = world.sync(client_id="traced")
    await eventually(lambda: client.snapshot_done, what="the snapshot")

    publisher = provider.get_tracer("test")
    with publisher.start_as_current_span("ingest.publish") as publish_span:
        headers = inject_headers()
    world.publish(world.batches.transaction(insert(row(2))), headers=headers)
    await eventually(lambda: client.sequences == [2], what="the live entry")

    trace_id = publish_span.get_span_context().trace_id
    spans = {s.name: s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id}
    assert set(spans) == {"ingest.publish", "fanout.apply", "fanout.sync.send"}
    apply, send = spans["fanout.apply"], spans["fanout.sync.send"]
    assert apply.parent is not None and apply.parent.span_id == publish_span.get_span_context().span_id
    assert send.parent is not None and send.parent.span_id == apply.context.span_id
    assert send.attributes["laredo.client_id"] == "traced" and send.attributes["laredo.sequence.first"] == 2
