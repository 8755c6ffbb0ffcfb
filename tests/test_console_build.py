"""OAM's web console is reproducible from the npm registry by the project's own script: scripts/build-console
into a scratch directory gives byte for byte the app.js the package ships (npm ci, pinned by package-lock.json)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "services" / "oam" / "src" / "laredo_oam" / "entrypoints" / "console" / "assets"

pytestmark = pytest.mark.slow


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed: apt-get install npm")
def test_the_shipped_console_is_what_the_build_script_makes(tmp_path: Path) -> None:
    built = subprocess.run([str(ROOT / "scripts" / "build-console")], env={**os.environ, "OUT": str(tmp_path)},
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "app.js").read_bytes() == (ASSETS / "app.js").read_bytes(), \
        "assets/app.js is not what scripts/build-console makes from services/oam/console: run it and commit"


def test_the_page_loads_only_files_the_package_ships() -> None:
    page = (ASSETS / "index.html").read_text()
    for name in ("app.js", "style.css"):
        assert f'"{name}"' in page and (ASSETS / name).is_file()
