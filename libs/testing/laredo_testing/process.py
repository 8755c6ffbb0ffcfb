"""Machinery shared by throwaway servers run as native processes: ports, PIDs, logs, clean-up."""

from __future__ import annotations

import atexit
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Protocol, Self

from laredo_testing.eventually import wait_until

logger = logging.getLogger(__name__)

START_ATTEMPTS = 3
# Debian puts nats-server in /usr/sbin, which is not on a non-root user's PATH.
SYSTEM_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin")


class ServerStartError(RuntimeError):
    """A test server did not come up; the message carries the tail of its log."""


class MissingExecutableError(ServerStartError):
    """A server executable is not installed; the message names the package to install."""


class _ExitedEarly(Exception):
    """The process died before it was ready (often: it lost the race for its port)."""


class _Closable(Protocol):
    def close(self) -> None: ...


_live: dict[int, _Closable] = {}


def track(server: _Closable) -> None:
    """Remember a started server so `close_all` can stop it if the session dies early."""
    _live[id(server)] = server


def untrack(server: _Closable) -> None:
    _live.pop(id(server), None)


def close_all() -> None:
    """Stop every server still running; registered with atexit and used by the pytest plugin."""
    for server in list(_live.values()):
        try:
            server.close()
        except Exception:  # noqa: BLE001 - clean-up must try every server
            logger.exception("could not stop test server %r", server)


atexit.register(close_all)


_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, never the same twice in one process.

    Taken below the kernel's ephemeral range when there is room: an outgoing connection (a client of NATS,
    PostgreSQL or a service) can then never take the port between this call and the server binding it, which
    matters for servers restarted on the same port. Callers still retry on a lost race with another process.
    """
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200 if low > 20_000 else 0):
        port = rng.randrange(15_000, low)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    _handed_out.add(port)
    return port


def free_ports_in_a_row(count: int) -> int:
    """A free port followed by count - 1 free ports (`--workers N`: the launcher's health port, then each
    worker's)."""
    while True:
        port = free_port()
        following = range(port + 1, port + count)
        if all(p not in _handed_out and _bindable(p) for p in following):
            _handed_out.update(following)
            return port


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def find_executable(name: str, *, install_hint: str) -> str:
    """Locate `name` on PATH or next to the running interpreter, or say what to install."""
    extra = os.pathsep.join([str(Path(sys.executable).parent), *SYSTEM_BIN_DIRS])
    found = shutil.which(name) or shutil.which(name, path=extra)
    if found is None:
        raise MissingExecutableError(f"{name} is not installed; install it with: {install_hint}")
    return found


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; zombies count as gone because PID 1 here may never reap them."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


def stop_pid(pid: int, *, sig: int = signal.SIGTERM, timeout: float = 15.0, what: str) -> None:
    """Send `sig` to `pid` and wait until it is gone; SIGKILL it if the deadline passes."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    try:
        wait_until(lambda: not pid_alive(pid), timeout=timeout, what=f"{what} (pid {pid}) to exit")
    except AssertionError:
        logger.warning("%s (pid %d) ignored signal %d for %.0fs; killing it", what, pid, sig, timeout)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        wait_until(lambda: not pid_alive(pid), timeout=5.0, what=f"{what} (pid {pid}) to die")


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    tail = "\n".join(text.splitlines()[-lines:])
    return f"--- last {lines} lines of {path} ---\n{tail}"


def make_run_dir(prefix: str) -> Path:
    """A fresh directory that other users (e.g. postgres) may traverse."""
    path = Path(tempfile.mkdtemp(prefix=f"laredo-{prefix}-"))
    path.chmod(0o755)
    return path


class StartedInContext:
    """`with server:` starts it and closes it afterwards, also when starting fails half-way."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ProcessServer(StartedInContext):
    """A server run as a direct child process, listening on loopback ports chosen at first start.

    Later starts reuse the same ports and directory, so a test can stop a server and bring it
    back where clients expect it. Subclasses provide the command line and a readiness probe.
    """

    name = "server"
    start_timeout = 30.0

    def __init__(self, run_dir: Path | None = None) -> None:
        self._given_run_dir = run_dir
        self._run_dir: Path | None = run_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._ports_chosen = False
        self.port = 0  # the port clients connect to, set by _choose_ports

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            self._run_dir = make_run_dir(self.name)
        return self._run_dir

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _choose_ports(self) -> None:
        raise NotImplementedError

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _is_ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> Self:
        """Start the server (idempotent) and wait until it answers."""
        if self.running:
            return self
        first_start = not self._ports_chosen
        attempts = START_ATTEMPTS if first_start else 1
        for attempt in range(1, attempts + 1):
            if first_start:
                self._choose_ports()
            try:
                self._spawn_and_wait()
                break
            except _ExitedEarly as exc:
                if attempt == attempts:
                    raise ServerStartError(str(exc)) from None
                # Most likely another process took the port between probing and binding.
                logger.info("%s exited during start-up, retrying on new ports", self.name)
        self._ports_chosen = True
        track(self)
        logger.info("%s started (pid %s) %s", self.name, self.pid, self.describe())
        return self

    def _spawn_and_wait(self) -> None:
        command = self._command()
        with self.log_path.open("ab") as log:
            # Own session: a Ctrl-C aimed at pytest must not kill servers before teardown.
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          cwd=self.run_dir, start_new_session=True)
        proc = self._proc
        try:
            wait_until(lambda: proc.poll() is not None or self._is_ready(), timeout=self.start_timeout,
                       what=f"{self.name} to accept connections")
        except AssertionError as exc:
            self.stop()
            raise ServerStartError(f"{self.name} did not become ready within {self.start_timeout:g}s: "
                                   f"{' '.join(command)}\n{log_tail(self.log_path)}") from exc
        if proc.poll() is not None:
            self._proc = None
            raise _ExitedEarly(f"{self.name} exited with code {proc.returncode} during start-up: "
                               f"{' '.join(command)}\n{log_tail(self.log_path)}")

    def describe(self) -> str:
        return ""

    def stop(self) -> None:
        """Stop the process by PID; ports and directory are kept for a later start()."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stop_pid(proc.pid, what=self.name)
        proc.wait(timeout=5.0)

    def close(self) -> None:
        """Stop the process and remove the directory this object created."""
        self.stop()
        untrack(self)
        if self._given_run_dir is None and self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
            self._ports_chosen = False
