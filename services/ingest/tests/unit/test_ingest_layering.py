"""The layers point inward: domain/, ports.py and application/ import no I/O library and no impure shared module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "laredo_ingest"
FORBIDDEN_LIBRARIES = {"grpc", "google", "nats", "redis", "psycopg", "minio", "pyspark", "opentelemetry", "laredo",
                       "aiohttp", "pyhocon"}
PURE_CORE = {"laredo_kernel.position", "laredo_kernel.tuples", "laredo_kernel.pgtext", "laredo_kernel.jsonvalue",
             "laredo_kernel.changes", "laredo_kernel.errors", "laredo_core.stream.naming",
             # the coordination port and its store-agnostic loops (no Redis import)
             "laredo_core.coordination.ports", "laredo_core.coordination.heartbeat",
             # cancelling background tasks (asyncio only)
             "laredo_core.runtime"}
INNER = sorted([*(PACKAGE / "domain").glob("*.py"), PACKAGE / "ports.py", *(PACKAGE / "application").glob("*.py")])
LAYER_ORDER = {"domain": 0, "ports": 1, "application": 2}


def imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
    return modules


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "laredo_ingest" or len(parts) < 2:
        return None
    return LAYER_ORDER.get(parts[1], 99)  # adapters, entrypoints, main, config: outer layers


@pytest.mark.parametrize("path", INNER, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_inner_layers_import_only_pure_modules(path: Path) -> None:
    own_layer = layer_of("laredo_ingest." + path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", "."))
    for module in imported_modules(path):
        top = module.split(".")[0]
        assert top not in FORBIDDEN_LIBRARIES, f"{path.name} imports {module}"
        if top == "laredo_core":
            assert module in PURE_CORE, f"{path.name} imports {module}, which is not a pure laredo_core module"
        layer = layer_of(module)
        if layer is not None:
            assert layer <= own_layer, f"{path.name} imports {module} from an outer layer"
