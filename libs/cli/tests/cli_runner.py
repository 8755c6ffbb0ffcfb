"""Run `laredo` for tests: in-process (fast, streams captured) or as a subprocess, as a user runs it."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laredo_cli.main import run

#: Variables of the developer's shell that would change what a test's `laredo` does: removed for subprocesses.
CLI_VARIABLES = ("LAREDO_SERVER", "LAREDO_QUERY_SERVER", "LAREDO_TOKEN", "LAREDO_TOKEN_FILE", "LAREDO_TLS",
                     "LAREDO_CA", "LAREDO_CERT", "LAREDO_KEY", "LAREDO_TLS_SERVER_NAME")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines()]

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}--- stderr\n{self.err}"


def _run_capturing(argv: list[str], env: dict[str, str], interactive: bool) -> Result:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = run(argv, out=out, err=err, env=env, interactive=interactive)
    except SystemExit as exit_:  # argparse: usage errors and --help
        code = int(exit_.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


async def run_in_process(*argv: str, env: dict[str, str] | None = None, interactive: bool = False) -> Result:
    """The CLI on a worker thread, so servers on this event loop keep answering while it waits."""
    return await asyncio.to_thread(_run_capturing, list(argv), env or {}, interactive)


def laredo_command() -> list[str]:
    """The installed console script next to this interpreter, else `python -m laredo_cli`."""
    script = Path(sys.executable).with_name("laredo")
    return [str(script)] if script.exists() else [sys.executable, "-m", "laredo_cli"]


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLI_VARIABLES}
    env.update({"COLUMNS": "100", **(extra or {})})
    return env


async def run_subprocess(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    process = await asyncio.create_subprocess_exec(
        *laredo_command(), *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=subprocess_env(env))
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"laredo {' '.join(argv)} did not finish within {timeout}s") from None
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())
