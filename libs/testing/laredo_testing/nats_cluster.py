"""A throwaway 3-node NATS JetStream cluster on loopback: find a stream's leader, SIGKILL a node, restart it."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

from laredo_testing.eventually import wait_until
from laredo_testing.process import StartedInContext, free_port, make_run_dir, stop_pid, track, untrack
from laredo_testing.servers import LOOPBACK, NatsServer, http_ok, nats_server_executable

__all__ = ["NatsCluster", "NatsClusterNode"]

logger = logging.getLogger(__name__)


def _get_json(url: str) -> dict[str, Any] | None:
    """The JSON a monitoring endpoint answers, or None while the server is down or not ready."""
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:  # noqa: S310 - loopback only
            return dict(json.load(response))
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


class NatsClusterNode(NatsServer):
    """One member: its ports are fixed by the cluster before any node starts (the routes name them), and
    its store directory survives kill()/start(), as a crashed server's disk would."""

    start_timeout = 60.0

    def __init__(self, cluster_name: str, index: int, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.name = f"nats-{index}"
        self.server_name = f"{cluster_name}-n{index}"
        self.cluster_name = cluster_name
        self.port, self.cluster_port, self.monitor_port = free_port(), free_port(), free_port()
        self.peer_cluster_ports: tuple[int, ...] = ()
        self.advertise = True  # False: clients are not told the other nodes' addresses (see NatsCluster)

    @property
    def config_path(self) -> Path:
        return self.run_dir / "nats.conf"

    def describe(self) -> str:
        return f"{self.server_name} {self.url} (routes on {self.cluster_port}, monitoring on {self.monitor_port})"

    def monitoring(self, path: str) -> dict[str, Any] | None:
        """GET /<path> of this node's monitoring port as JSON; None while it does not answer."""
        return _get_json(f"http://{LOOPBACK}:{self.monitor_port}/{path}") if self.running else None

    def healthy(self) -> bool:
        """/healthz: JetStream on, the meta group known and every stream replica here current."""
        try:
            return self.running and http_ok(f"http://{LOOPBACK}:{self.monitor_port}/healthz")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def kill(self) -> int:
        """SIGKILL by PID (no lame duck, no flush) and wait until it is gone; returns the PID killed."""
        proc, self._proc = self._proc, None
        assert proc is not None, f"{self.server_name} is not running"
        stop_pid(proc.pid, sig=signal.SIGKILL, timeout=10.0, what=self.server_name)
        proc.wait(timeout=5.0)
        logger.info("%s killed (pid %d)", self.server_name, proc.pid)
        return proc.pid

    def _choose_ports(self) -> None:
        """Ports are chosen in __init__: the other nodes' routes already point at them."""

    def _command(self) -> list[str]:
        routes = ", ".join(f'"nats-route://{LOOPBACK}:{p}"' for p in self.peer_cluster_ports)
        self.config_path.write_text(f"""
server_name: "{self.server_name}"
listen: "{LOOPBACK}:{self.port}"
http: "{LOOPBACK}:{self.monitor_port}"
jetstream {{ store_dir: "{self.store_dir}" }}
cluster {{
  name: "{self.cluster_name}"
  listen: "{LOOPBACK}:{self.cluster_port}"
  routes: [{routes}]
  no_advertise: {"false" if self.advertise else "true"}
}}
""")
        return [nats_server_executable(), "-c", str(self.config_path)]


class NatsCluster(StartedInContext):
    """`size` nats-server processes routed to each other, JetStream stores under one temporary directory.

    Clients take `urls` (or the comma-separated `url`, as stream.nats_url accepts it) and fail over between
    the nodes. Every node is started and stopped by PID; `close()` removes the directory. With
    `advertise=False` clients learn no node addresses beyond the URLs they were given, so a client sent
    through a proxy stays behind it.
    """

    def __init__(self, size: int = 3, *, name: str = "laredo-test", advertise: bool = True) -> None:
        self.name = name
        self._dir = make_run_dir("nats-cluster")
        self.nodes = tuple(NatsClusterNode(name, i, self._dir / f"n{i}") for i in range(1, size + 1))
        for node in self.nodes:
            node.run_dir.mkdir()
            node.advertise = advertise
            node.peer_cluster_ports = tuple(n.cluster_port for n in self.nodes if n is not node)

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(node.url for node in self.nodes)

    @property
    def url(self) -> str:
        return ",".join(self.urls)

    def start(self) -> Self:
        """Start every node that is down and wait until the cluster has a meta leader and all are healthy."""
        track(self)
        for node in self.nodes:
            node.start()
        self.wait_healthy()
        logger.info("NATS cluster %s up: %s", self.name, self.url)
        return self

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every running node answers /healthz (meta leader known, its stream replicas current)."""
        wait_until(lambda: all(n.healthy() for n in self.running_nodes()), timeout=timeout, interval=0.2,
                   what=f"every running node of NATS cluster {self.name} to report /healthz ok")

    def running_nodes(self) -> list[NatsClusterNode]:
        return [node for node in self.nodes if node.running]

    def node(self, server_name: str) -> NatsClusterNode:
        for node in self.nodes:
            if node.server_name == server_name:
                return node
        raise KeyError(f"no node named {server_name!r} in cluster {self.name} "
                       f"({', '.join(n.server_name for n in self.nodes)})")

    def stream_details(self, stream: str) -> Iterator[tuple[NatsClusterNode, dict[str, Any]]]:
        """What each running node holding a replica of `stream` reports of it on /jsz (state, cluster)."""
        for node in self.running_nodes():
            jsz = node.monitoring("jsz?accounts=true&streams=true") or {}
            for account in jsz.get("account_details") or []:
                for detail in account.get("stream_detail") or []:
                    if detail.get("name") == stream:
                        yield node, detail

    def stream_cluster(self, stream: str) -> dict[str, Any] | None:
        """The stream's cluster info (leader, replicas with current/lag) as some running node reports it."""
        for _, detail in self.stream_details(stream):
            if detail.get("cluster", {}).get("leader"):
                return dict(detail["cluster"])
        return None

    def stream_leader(self, stream: str, timeout: float = 30.0) -> NatsClusterNode:
        """The node currently leading `stream` (waits through an election, up to `timeout`)."""
        def leader() -> NatsClusterNode | None:
            info = self.stream_cluster(stream)
            if info is None:
                return None
            node = self.node(info["leader"])
            return node if node.running else None

        found = wait_until(leader, timeout=timeout, interval=0.2,
                           what=f"stream {stream} to have a leader among running nodes")
        assert isinstance(found, NatsClusterNode)
        return found

    def wait_stream_replicated(self, stream: str, replicas: int, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until `replicas` running nodes hold `stream` with the same last sequence; returns that state."""
        def agreed() -> dict[str, Any] | None:
            states = {node.server_name: detail.get("state", {}) for node, detail in self.stream_details(stream)}
            last = {s.get("last_seq") for s in states.values()}
            return dict(next(iter(states.values()))) if len(states) == replicas and len(last) == 1 else None

        state = wait_until(agreed, timeout=timeout, interval=0.2,
                           what=f"{replicas} running nodes to hold stream {stream} up to the same sequence")
        assert isinstance(state, dict)
        return state

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def close(self) -> None:
        """Stop every node by PID and remove the stores."""
        try:
            for node in self.nodes:
                node.close()
        finally:
            untrack(self)
            shutil.rmtree(self._dir, ignore_errors=True)
