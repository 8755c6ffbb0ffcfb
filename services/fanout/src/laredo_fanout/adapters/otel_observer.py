"""The Observer port as OpenTelemetry spans: ingest.publish -> fanout.apply -> fanout.sync.send.

fanout.apply is a child of the remote context in the message's traceparent header and travels with every journal
entry the message produced: each send to a client is its child (one span for consecutive entries of one apply).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from laredo_kernel.changes import TableId
from laredo_core.telemetry import extract_context

from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.ports import FeedMessage


class OtelObserver:
    def __init__(self, tracer_provider: TracerProvider) -> None:
        self._tracer = tracer_provider.get_tracer("laredo_fanout")

    @contextmanager
    def applying(self, message: FeedMessage) -> Iterator[object | None]:
        batch = message.batch
        span = self._tracer.start_span("fanout.apply", context=extract_context(message.headers), attributes={
            "laredo.table": str(message.table),
            "laredo.batch.kind": batch.kind.value,
            "laredo.batch.changes": len(batch.changes),
            "laredo.stream.sequence": message.stream_sequence,
        })
        try:
            yield trace.set_span_in_context(span)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        finally:
            span.end()

    def entries_sent(self, table: TableId, client_id: str, entries: Sequence[JournalEntry]) -> None:
        start = 0
        for index in range(1, len(entries) + 1):
            if index == len(entries) or entries[index].trace is not entries[start].trace:
                self._send_span(table, client_id, entries[start:index])
                start = index

    def _send_span(self, table: TableId, client_id: str, entries: Sequence[JournalEntry]) -> None:
        parent = entries[0].trace
        if parent is None or not trace.get_current_span(parent).get_span_context().trace_flags.sampled:  # type: ignore
            return  # an unsampled apply: its sends would not be recorded either
        span = self._tracer.start_span("fanout.sync.send", context=parent, attributes={  # type: ignore[arg-type]
            "laredo.table": str(table),
            "laredo.client_id": client_id,
            "laredo.sequence.first": entries[0].sequence,
            "laredo.sequence.last": entries[-1].sequence,
            "laredo.entries": len(entries),
        })
        span.end()
