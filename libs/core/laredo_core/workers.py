"""Several processes of one service on one port (`--workers N`): one Python process is one core.

The launcher starts N workers, each a whole instance of the service (its own copy of the tables, its own change
feed and front door) under an instance id of its own, all listening on the configured port: every listener
sets SO_REUSEPORT (Envoy and grpcio do by default), so the kernel spreads new connections over them. Clients
resume on any instance by sequence or WAL position, so which worker a reconnecting client reaches does not
matter. The launcher answers health_port for all its workers (laredo_core.worker_health) and worker `i` serves
its own on health_port + 1 + i; when the launcher cannot ask them (health listeners that require client
certificates) worker `i` serves health_port + i. With health_port 0 each worker picks a port of its own.

The launcher holds the port from before the first worker starts until the last one stops (a bound socket that
does not listen takes no connections), so port 0 works, and no other program takes the port between two
workers' starts. A worker that exits unbidden is started again (logged as an error), one that refuses its
configuration stops them all; SIGTERM or SIGINT is passed to every worker, which drain and stop as one
service does, and a worker ends with its launcher however the launcher ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from laredo_core.cli import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK
from laredo_core.config import ServiceEndpoint
from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.health import HealthServer
from laredo_core.runtime import cancel
from laredo_core.subprocesses import tied_to_parent
from laredo_core.worker_health import answers_for_workers, serve_worker_health
from laredo_kernel.errors import ConfigError, LaredoError

log = logging.getLogger(__name__)

#: Seconds a worker gets to stop beyond its own stop grace before it is killed (it ends itself before that).
KILL_AFTER = 10.0
#: A worker that ran at least this long before exiting is started again at once; sooner, after a growing pause.
STEADY_RUN = 30.0
MAX_BACKOFF = 10.0


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """How the launcher runs `count` workers of `module` (run with python -m) for the `section` endpoint."""

    module: str
    section: str  # the configuration section of the service's endpoint: fanout, query
    count: int
    argv: Sequence[str]  # the launcher's own arguments; each worker gets them plus its own overrides
    stop_grace: float  # what the service takes to stop once told to (drain included)


def worker_arguments(plan: WorkerPlan, endpoint: ServiceEndpoint, index: int, port: int,
                     health_offset: int = 1) -> list[str]:
    """A worker's command line: the launcher's, as one worker, on the held port, with its own health port
    (health_port + health_offset + index) and (when one is configured) instance id."""
    health = endpoint.health_port + health_offset + index if endpoint.health_port else 0
    overrides = [f"{plan.section}.grpc.port={port}", f"{plan.section}.health_port={health}"]
    if endpoint.instance_id:
        overrides.append(f"{plan.section}.instance_id={endpoint.instance_id}-w{index}")
    sets = [arg for override in overrides for arg in ("--set", override)]
    return [sys.executable, "-m", plan.module, *plan.argv, "--workers", "1", "--worker-index", str(index), *sets]


def _socket(host: str) -> socket.socket:
    return socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)


def hold_port(host: str, port: int) -> socket.socket:
    """Bind (without listening) host:port with SO_REUSEPORT; port 0 picks one. The workers bind beside it."""
    held = _socket(host)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        held.bind((host, port))
    except OSError:
        held.close()
        raise
    return held


async def run_workers(prog: str, plan: WorkerPlan, endpoint: ServiceEndpoint, stop: asyncio.Event,
                      health_tls: TlsSettings | None = None) -> None:
    """Run the workers until `stop` is set, then stop them all. Raises ConfigError when one refuses its
    configuration, LaredoError when one did not stop cleanly."""
    answers = bool(endpoint.health_port) and answers_for_workers(health_tls)  # else health_port is worker 0's
    offset = 1 if answers else 0
    _check_health_ports(plan, endpoint, offset)
    held = hold_port(endpoint.grpc_host, endpoint.grpc_port)
    port = held.getsockname()[1]
    log.info("%s: %d workers on %s:%d (SO_REUSEPORT)", prog, plan.count, endpoint.grpc_host, port)
    workers = [_Worker(prog, i, worker_arguments(plan, endpoint, i, port, offset)) for i in range(plan.count)]
    health: tuple[HealthServer, asyncio.Task[None]] | None = None
    try:
        if answers:
            health = await serve_worker_health(endpoint.health_host, endpoint.health_port, [
                endpoint.health_port + offset + i for i in range(plan.count)], health_tls)
        for worker in workers:
            await worker.start()
        refused = await _watch(workers, stop)
    finally:
        codes = await asyncio.gather(*(w.stop(plan.stop_grace + KILL_AFTER) for w in workers))
        held.close()
        if health is not None:
            await health[0].stop()
            await cancel([health[1]])
    if refused:
        raise ConfigError([f"a worker of {prog} refused its configuration; its log above says why"])
    failed = [w.name for w, code in zip(workers, codes) if code != EXIT_OK]
    if failed:
        raise LaredoError(f"{', '.join(failed)} did not stop cleanly; their log above says why")


def _check_health_ports(plan: WorkerPlan, endpoint: ServiceEndpoint, offset: int) -> None:
    """Worker i listens on health_port + offset + i (the launcher on health_port when offset is 1): a port in
    use there would make that worker fail again and again."""
    if not endpoint.health_port:
        return
    for step in range(plan.count + offset):
        port = endpoint.health_port + step
        who = "the launcher" if step < offset else f"worker {step - offset} of {plan.count}"
        with _socket(endpoint.health_host) as probe:
            try:
                probe.bind((endpoint.health_host, port))
            except OSError as exc:
                raise ConfigError([
                    f"{plan.section}.health_port: {who} serves health on {endpoint.health_host}:{port} "
                    f"({plan.section}.health_port + {step}), which is taken ({exc.strerror}); choose a health_port "
                    f"followed by {plan.count + offset - 1} free ports, or 0"]) from None


async def _watch(workers: list[_Worker], stop: asyncio.Event) -> bool:
    """Start again each worker that exits, until `stop`; True when one refused its configuration."""
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            exits = {asyncio.ensure_future(w.wait()): w for w in workers if w.running}
            done, _ = await asyncio.wait({stopped, *exits}, return_when=asyncio.FIRST_COMPLETED)
            for waiting in exits:
                waiting.cancel()
            for finished in done - {stopped}:
                worker = exits[finished]
                if finished.result() == EXIT_CONFIG:
                    log.error("%s refused its configuration (exit code %d); stopping every worker",
                              worker.name, EXIT_CONFIG)
                    return True
                await worker.restart(stop)
        return False
    finally:
        stopped.cancel()


class _Worker:
    def __init__(self, prog: str, index: int, args: list[str]) -> None:
        self.name = f"{prog} worker {index}"
        self._args = args
        self._process: asyncio.subprocess.Process | None = None
        self._started = 0.0
        self._backoff = 0.5

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        args, launch = tied_to_parent(self._args)
        self._process = await asyncio.create_subprocess_exec(*args, stdin=asyncio.subprocess.DEVNULL, **launch)
        self._started = time.monotonic()
        log.info("%s started (pid %d)", self.name, self._process.pid)

    async def wait(self) -> int:
        assert self._process is not None
        return await self._process.wait()

    async def restart(self, stop: asyncio.Event) -> None:
        assert self._process is not None
        ran = time.monotonic() - self._started
        self._backoff = 0.0 if ran >= STEADY_RUN else min(max(self._backoff * 2, 0.5), MAX_BACKOFF)
        log.error("%s exited with code %s after %.1fs; starting it again in %.1fs", self.name,
                  self._process.returncode, ran, self._backoff)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._backoff):
                await stop.wait()
        if not stop.is_set():
            await self.start()

    async def stop(self, within: float) -> int:
        """SIGTERM, then SIGKILL if it is still running `within` seconds later; its exit code."""
        process = self._process
        if process is None:
            return EXIT_OK
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), within)
            except TimeoutError:
                log.error("%s still running %.0fs after SIGTERM; killing it", self.name, within)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        return process.returncode if process.returncode is not None else EXIT_FAILURE
