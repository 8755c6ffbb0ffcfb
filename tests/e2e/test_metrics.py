"""Prometheus /metrics on every service's health port, scraped from a running system and read with
prometheus_client's parser: the figures move when changes flow.

ingest, fan-out, query, OAM and the snapshot service (sequential engine, a local store) run as processes on a
throwaway PostgreSQL, NATS and Redis; a client of the fan-out reads the table while rows are inserted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from laredo.v1 import query_pb2
from laredo_kernel.changes import TableId
from laredo_testing.eventually import eventually

from tests.e2e.harness import Samples, ServiceProcess, create_table, free_port, scrape, serving
from tests.e2e.system import SERVICES, System, SystemConfig, connected_replica, running_system

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "compose" / "grafana" / "dashboards" / "laredo.json"


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample named `name` whose labels include `labels` (a missing one fails, naming what is there)."""
    found = [v for (n, have), v in samples.items() if n == name and set(labels.items()) <= set(have)]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples; names: {sorted({n for n, _ in samples})}"
    return found[0]


@pytest.fixture
def system(pg_dsn: str, nats_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 200)
    store = json.dumps(str(tmp_path / "snapshots"))
    snapshots = f"snapshot {{ interval = 0s, store = local, store_config {{ path = {store} }} }}"
    config = SystemConfig(fanout_target=snapshots)
    with running_system(pg_dsn, nats_url, unique_name, table, tmp_path, config=config) as running:
        yield running


@pytest.fixture
def snapshot_service(system: System, tmp_path: Path) -> Iterator[ServiceProcess]:
    """The snapshot service on the system's configuration, compacting every second."""
    process = ServiceProcess("snapshot", tmp_path / "laredo.conf", free_port(), tmp_path / "snapshot.log")
    process.extra_args = ["--set", "snapshot.engine=sequential", "--set", "snapshot.interval=1s",
                          "--set", "snapshot.health_host=127.0.0.1",
                          "--set", f"snapshot.health_port={process.health_port}"]
    with serving(process):
        yield process


async def test_every_service_serves_prometheus_metrics_that_move_when_changes_flow(
        system: System, snapshot_service: ServiceProcess) -> None:
    ports = {name: system.services[name].health_port for name in SERVICES} | {
        "snapshot": snapshot_service.health_port}
    table, pipeline = {"table": str(system.table)}, {"pipeline": system.pipeline("replication-fanout")}
    async with connected_replica(system, "metrics") as replica:
        before = {name: scrape(port)[0] for name, port in ports.items()}
        for name, samples in before.items():  # every service reports its process too
            assert value(samples, "process_resident_memory_bytes") > 0, name
        assert value(before["fanout"], "laredo_fanout_rows", **table) == 200
        assert value(before["fanout"], "laredo_fanout_clients", state="live", **table) == 1
        await system.query("CountRows", query_pb2.CountRowsRequest(schema=system.table.schema,
                                                                   table=system.table.name))

        system.sql(f"INSERT INTO {system.table} (id, name, qty) "
                   "SELECT g, 'n' || g, g FROM generate_series(1001, 1050) g")
        await eventually(lambda: len(replica.rows()) == 250, timeout=30, what="the client holds the 50 new rows")
        moved = {
            "ingest": lambda s: value(s, "laredo_ingest_changes_total") >= 50,
            "fanout": lambda s: value(s, "laredo_fanout_rows", **table) == 250,
            "query": lambda s: value(s, "laredo_query_rows", **table) == 250,
            "oam": lambda s: value(s, "laredo_oam_pipeline_rows", **pipeline) == 250,
            "snapshot": lambda s: value(s, "laredo_snapshot_last_rows", **table) == 250,
        }
        for name, check in moved.items():
            await eventually(lambda: check(scrape(ports[name])[0]), timeout=30, interval=0.2,
                             what=f"{name}'s /metrics shows the 50 new rows")
        after = {name: scrape(port) for name, port in ports.items()}

    ingest, ingest_types = after["ingest"]
    assert ingest_types["laredo_ingest_changes"] == "counter"
    assert value(ingest, "laredo_ingest_publish_acks_total") > value(before["ingest"],
                                                                      "laredo_ingest_publish_acks_total")
    assert value(ingest, "laredo_ingest_publish_ack_seconds_total") > 0
    assert value(ingest, "laredo_ingest_streaming") == 1
    fanout, fanout_types = after["fanout"]
    assert fanout_types["laredo_fanout_deliveries"] == "counter"
    assert value(fanout, "laredo_fanout_deliveries_total", **table) >= 250  # the snapshot, then the new rows
    assert value(fanout, "laredo_fanout_journal_sequence", **table) > value(
        before["fanout"], "laredo_fanout_journal_sequence", **table)
    assert value(fanout, "laredo_fanout_ready", **table) == 1
    query = after["query"][0]
    assert value(query, "laredo_query_changes_applied_total", action="inserts", **table) == 50
    assert value(fanout, "laredo_fanout_changes_applied_total", action="inserts", **table) == 50
    assert value(query, "laredo_query_reads_total", **table) > value(before["query"], "laredo_query_reads_total",
                                                                     **table)
    assert value(query, "laredo_query_ready", **table) == 1
    assert {dict(labels)["action"] for name, labels in query if name == "laredo_query_changes_applied_total"} == {
        "inserts", "updates", "deletes", "truncates"}
    oam = after["oam"][0]
    assert value(oam, "laredo_oam_pipeline_state", state="streaming", **pipeline) == 1
    assert value(oam, "laredo_oam_source_reporting", source="pg") == 1
    snapshot = after["snapshot"][0]
    assert value(snapshot, "laredo_snapshot_passes_total") >= 1
    assert value(snapshot, "laredo_snapshot_last_failed", **table) == 0

    exported = {name for samples, _ in after.values() for name, _ in samples}
    dashboard = json.loads(DASHBOARD.read_text())
    charted = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\b(?:laredo|process)_[a-z_]+", target["expr"])}
    assert charted and charted <= exported, f"the Grafana dashboard charts figures no service exports: " \
                                            f"{sorted(charted - exported)}"
