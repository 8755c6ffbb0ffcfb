"""One inserted row is one trace: ingest publish -> fan-out apply -> Sync send (services in-process)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from laredo_client import LaredoClient
from laredo_core.config import load_settings
from laredo_core.telemetry import build_tracer_provider
from laredo_fanout.main import build as build_fanout
from laredo_ingest.main import build as build_ingest
from laredo_testing.eventually import eventually

from tests.e2e.harness import free_port, write_config

pytestmark = pytest.mark.integration

SPANS = ("ingest.publish", "fanout.apply", "fanout.sync.send")


async def test_one_row_is_one_trace_across_ingest_fanout_and_sync(pg_dsn: str, nats_url: str, unique_name: str,
                                                                  tmp_path: Path) -> None:
    table = f"public.{unique_name}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 'before')")
    port = free_port()
    config = write_config(tmp_path / "laredo.conf", pg_dsn=pg_dsn, nats_url=nats_url, source_id="pg",
                          slot=f"slot_{unique_name}", prefix=f"t{unique_name}", tables=[table], fanout_port=port,
                          health_ports={"ingest": free_port(), "fanout": free_port()})
    settings = load_settings(config)
    exporter = InMemorySpanExporter()
    ingest = build_ingest(settings, tracer_provider=build_tracer_provider(settings.telemetry, "laredo-ingest",
                                                                          exporter=exporter))
    fanout = build_fanout(settings, tracer_provider=build_tracer_provider(settings.telemetry, "laredo-fanout",
                                                                          exporter=exporter))
    stop = asyncio.Event()
    tasks = [asyncio.create_task(ingest.run(stop)), asyncio.create_task(fanout.run(stop))]
    try:
        await eventually(lambda: fanout.readiness()[0], timeout=60, what="fan-out ready (baseline applied)")
        async with LaredoClient(f"127.0.0.1:{port}", "public", unique_name, client_id="tracing") as client:
            await client.await_ready(60)
            exporter.clear()
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f"INSERT INTO {table} VALUES (2, 'traced')")
            await eventually(lambda: client.get(2) is not None, timeout=30, what="row 2 reached the client")

            def one_trace_with_all_spans() -> bool:
                by_trace: dict[int, set[str]] = {}
                for span in exporter.get_finished_spans():
                    by_trace.setdefault(span.context.trace_id, set()).add(span.name)
                return any(set(SPANS) <= names for names in by_trace.values())

            await eventually(one_trace_with_all_spans, timeout=15,
                             what=f"one trace holding {', '.join(SPANS)}")
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{unique_name}",))
