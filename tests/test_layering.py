"""Layering: import-linter's contracts in .importlinter hold for this checkout, and they catch violations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".importlinter"
SERVICES = ("laredo_ingest", "laredo_fanout", "laredo_query", "laredo_oam")


def _lint_imports() -> str:
    beside_python = Path(sys.executable).parent / "lint-imports"
    found = str(beside_python) if beside_python.exists() else shutil.which("lint-imports")
    if not found:
        pytest.fail("lint-imports not found: install the test extras (pip install -e '.[test]')")
    return found


def _source_roots() -> list[str]:
    """This checkout's package roots, so the check sees these files even if another checkout is installed."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [str(ROOT / where) for where in pyproject["tool"]["setuptools"]["packages"]["find"]["where"]]


def _run(*path_first: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200",  # keep each reported import on one line
           "PYTHONPATH": os.pathsep.join([*map(str, path_first), *_source_roots()])}
    return subprocess.run([_lint_imports(), "--config", str(CONFIG), "--no-cache", "--no-logo"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_the_layering_contracts_hold() -> None:
    result = _run()
    assert result.returncode == 0, f"import-linter found layering violations:\n{result.stdout}\n{result.stderr}"
    assert "broken" in result.stdout and " 0 broken" in result.stdout


def _write(root: Path, module: str, source: str = "") -> None:
    path = root.joinpath(*module.split(".")) / "__init__.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)


def test_the_contracts_catch_violations_and_tolerate_missing_layers(tmp_path: Path) -> None:
    """Stand-in service packages shadow the real ones: one with violations, the others with no layers at all."""
    for service in SERVICES:
        _write(tmp_path, service)
    _write(tmp_path, "laredo_query.domain", "import grpc\nfrom laredo_core import telemetry\n")
    _write(tmp_path, "laredo_query.application", "import laredo_fanout\nfrom laredo_query import entrypoints\n")
    _write(tmp_path, "laredo_query.entrypoints")
    result = _run(tmp_path)
    assert result.returncode != 0, result.stdout
    for expected in ("laredo_query.domain is not allowed to import grpc",
                     "laredo_query.domain is not allowed to import laredo_core.telemetry",
                     "laredo_query is not allowed to import laredo_fanout",
                     "laredo_query.application is not allowed to import laredo_query.entrypoints"):
        assert expected in result.stdout, f"{expected!r} not reported:\n{result.stdout}"
    assert "does not exist" not in result.stdout + result.stderr
