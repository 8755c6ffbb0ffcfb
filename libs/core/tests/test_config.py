"""Configuration loading: the example files load, overrides apply, and problems are reported all at once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from laredo_core.config import ENDPOINT_KEYS, load_settings, parse_duration, service_reader
from laredo_kernel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
LOCAL_EXAMPLE = ROOT / "examples" / "laredo.conf"
COMPOSE_EXAMPLE = ROOT / "examples" / "compose" / "laredo.conf"
DOCS = ROOT / "docs" / "configuration.md"

MINIMAL = """
sources { main { type = postgresql, connection = "host=127.0.0.1 dbname=app" } }
tables = [ { source = main, table = items, targets = [ { type = replication-fanout } ] } ]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "laredo.conf"
    path.write_text(text)
    return path


def problems_of(path: Path | None, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env=kwargs.pop("env", {}), **kwargs)
    return caught.value.problems


@pytest.mark.parametrize("example", [LOCAL_EXAMPLE, COMPOSE_EXAMPLE], ids=["local", "compose"])
def test_example_configs_load_without_problems(example: Path) -> None:
    settings = load_settings(example, env={})
    fanout_tables = settings.tables_with_target("replication-fanout")
    assert [(t.table.schema, t.table.name) for t in fanout_tables] == [("public", "demo_items")]
    assert all(t.source_id in settings.sources for t in settings.tables)


def test_local_example_uses_the_single_machine_ports() -> None:
    settings = load_settings(LOCAL_EXAMPLE, env={})
    (source,) = settings.sources.values()
    assert "host=127.0.0.1" in source.connection and "port=5432" in source.connection
    assert settings.stream.nats_urls == ("nats://127.0.0.1:4222",)
    assert settings.redis.url == "redis://127.0.0.1:6379/0"
    grpc_ports = (settings.oam.grpc_port, settings.fanout.grpc_port, settings.query.grpc_port)
    assert grpc_ports == (4001, 4002, 4003)
    health_ports = [getattr(settings, s).health_port for s in ("ingest", "fanout", "query", "oam")]
    assert health_ports == [8081, 8082, 8083, 8084]


def test_local_example_spells_out_the_fanout_target_options() -> None:
    (table,) = load_settings(LOCAL_EXAMPLE, env={}).tables
    (target,) = table.targets_of("replication-fanout")
    assert target.options["journal"]["max_entries"] == 100000
    assert parse_duration(target.options["journal"]["max_age"]) == 24 * 3600
    assert parse_duration(target.options["heartbeat_interval"]) == 5
    assert target.options["max_clients"] == 0


def test_several_problems_are_reported_at_once_each_naming_its_key(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + """
stream { replicas = 9, max_batch_bytes = lots, duplicate_window = soon }
redis { url = "http://cache:6379" }
telemetry { exporter = jaeger, sample_ratio = 2 }
fanout { grpc { port = 70000 } }
""")
    problems = problems_of(path)
    expected_keys = ["stream.replicas", "stream.max_batch_bytes", "stream.duplicate_window", "redis.url",
                     "telemetry.exporter", "telemetry.sample_ratio", "fanout.grpc.port"]
    for key in expected_keys:
        assert any(p.startswith(f"{key}: ") for p in problems), f"no problem names {key}: {problems}"
    assert len(problems) == len(expected_keys)
    message = str(ConfigError(problems))
    assert f"{len(expected_keys)} problem(s)" in message


def test_required_keys_and_dangling_source_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, """
sources { main { type = postgresql } }
tables = [ { source = other, table = items, targets = [] } ]
""")
    problems = problems_of(path)
    assert any(p.startswith("sources.main.connection: is required") for p in problems)
    assert any(p.startswith("tables[0].targets: at least one target") for p in problems)
    assert any("names source 'other'" in p and "defined: main" in p for p in problems)


@pytest.mark.parametrize("text, key", [
    ("stream { nats_ur = \"nats://x:4222\" }", "stream.nats_ur"),
    ("sources.main.reconnect.max_backof = 5s", "sources.main.reconnect.max_backof"),
    ("streams { replicas = 1 }", "streams"),
])
def test_unknown_key_is_reported_with_its_path(tmp_path: Path, text: str, key: str) -> None:
    problems = problems_of(write(tmp_path, MINIMAL + text))
    assert problems == [f"{key}: unknown key (check the spelling; see docs/configuration.md)"]


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "stream { nats_url = \"nats://file:4222\" }")
    env = {"LAREDO__STREAM__NATS_URL": "nats://env-a:4222,nats://env-b:4222",
           "LAREDO__TABLES__0__TABLE": "orders",
           "LAREDO__FANOUT__GRPC__PORT": "4102",
           "UNRELATED": "ignored"}
    settings = load_settings(path, env=env)
    assert settings.stream.nats_urls == ("nats://env-a:4222", "nats://env-b:4222")
    assert settings.tables[0].table.name == "orders"
    assert settings.fanout.grpc_port == 4102


def test_set_overrides_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    settings = load_settings(path, env={"LAREDO__STREAM__REPLICAS": "2"},
                             sets=["stream.replicas=3", "sources.main.status_interval=250ms",
                                   "tables.0.targets.0.max_clients=50"])
    assert settings.stream.replicas == 3
    assert settings.sources["main"].status_interval == 0.25
    assert settings.tables[0].targets[0].options["max_clients"] == "50"


def test_bad_overrides_are_reported_with_their_origin(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    problems = problems_of(path, env={"LAREDO__TABLES__5__TABLE": "x"}, sets=["no-equals-sign"])
    assert any(p.startswith("environment variable LAREDO__TABLES__5__TABLE: tables.5 is not an element")
               for p in problems)
    assert "--set 'no-equals-sign': expected key.path=value" in problems
    assert problems_of(path, sets=["stream.replicas=many"]) == ["stream.replicas: expected a whole number, "
                                                               "got 'many'"]


def test_missing_file_and_syntax_error_say_what_to_do(tmp_path: Path) -> None:
    (missing,) = problems_of(tmp_path / "absent.conf")
    assert "does not exist" in missing and "--config" in missing and "LAREDO_CONFIG" in missing
    (syntax,) = problems_of(write(tmp_path, "stream { replicas = 2\n nats_url = [\n"))
    assert "HOCON syntax error" in syntax and re.search(r"line:?\s*\d+", syntax)


@pytest.mark.parametrize("text, seconds", [
    ("500ms", 0.5), ("5s", 5), ("10m", 600), ("24h", 86400), ("7d", 604800), ("10 seconds", 10),
    ("\"2 minutes\"", 120), ("30", 30), ("0.25", 0.25),
])
def test_duration_syntax(tmp_path: Path, text: str, seconds: float) -> None:
    settings = load_settings(write(tmp_path, MINIMAL + f"stream {{ duplicate_window = {text} }}"), env={})
    assert settings.stream.duplicate_window == pytest.approx(seconds)


@pytest.mark.parametrize("text, size", [("512KiB", 524288), ("1MB", 10**6), ("2mib", 2 * 2**20), ("4096", 4096)])
def test_size_syntax(tmp_path: Path, text: str, size: int) -> None:
    settings = load_settings(write(tmp_path, MINIMAL + f"stream {{ max_batch_bytes = {text} }}"), env={})
    assert settings.stream.max_batch_bytes == size


def test_defaults_and_the_legacy_oam_port(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, MINIMAL + "grpc { port = 5001 }"), env={})
    assert settings.oam.grpc_port == 5001
    assert (settings.fanout.grpc_port, settings.query.grpc_port) == (4002, 4003)
    assert settings.sources["main"].slot_name == "laredo_main"
    assert settings.sources["main"].publication_name == "laredo_main_pub"
    both = load_settings(write(tmp_path, MINIMAL + "grpc { port = 5001 }\noam { grpc { port = 5002 } }"), env={})
    assert both.oam.grpc_port == 5002


def _leaf_keys(tree: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(tree, dict):
        return set().union(*(_leaf_keys(v, (*path, k)) for k, v in tree.items())) if tree else set()
    if isinstance(tree, list) and tree and all(isinstance(item, dict) for item in tree):
        return set().union(*(_leaf_keys(item, path) for item in tree))
    return {path}


def test_docs_describe_every_key_of_the_local_example() -> None:
    """docs/configuration.md names each key the complete example sets (`key` or `section.key`)."""
    docs = DOCS.read_text()
    tree = load_settings(LOCAL_EXAMPLE, env={}).raw
    undocumented = []
    for path in sorted(_leaf_keys(tree)):
        relative = path[2:] if path[0] == "sources" else path[1:]  # drop "sources.<id>" / the section name
        candidates = {".".join(relative[i:]) for i in range(len(relative))}
        if not any(f"`{c}`" in docs for c in candidates):
            undocumented.append(".".join(path))
    assert not undocumented, f"docs/configuration.md does not describe: {undocumented}"


@pytest.mark.parametrize("text, name, grpc, key", [
    ("fanout { helth_port = 1 }", "fanout", True, "fanout.helth_port"),
    ("fanout { grpc { prot = 1 } }", "fanout", True, "fanout.grpc.prot"),
    ("ingest { grpc { port = 1 } }", "ingest", False, "ingest.grpc"),
])
def test_a_service_reports_unknown_keys_in_its_own_section(tmp_path: Path, text: str, name: str, grpc: bool,
                                                           key: str) -> None:
    settings = load_settings(write(tmp_path, MINIMAL + text))
    known = ENDPOINT_KEYS if grpc else tuple(k for k in ENDPOINT_KEYS if k != "grpc")
    reader = service_reader(getattr(settings, name).options, name, [], known=known)
    reader.check_unknown()
    assert reader.problems == [f"{key}: unknown key (check the spelling; see docs/configuration.md)"]
