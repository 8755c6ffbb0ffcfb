"""The system a chaos run torments: its own PostgreSQL, NATS (one node or a 3-node cluster) and Redis, ingest
(talking to NATS through a FaultProxy), two fan-outs and the query service, as processes; and the faults.

Every server belongs to the run (nothing shared with other tests), so restarting PostgreSQL or NATS harms no
one else. Blocking work (restarts, readiness) runs in threads: the clients on the event loop keep going.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nats
import psycopg

from laredo_kernel.changes import TableId
from laredo_core.stream.naming import stream_name, table_subject
from laredo_testing.eventually import eventually
from laredo_testing.fault_proxy import FaultProxy
from laredo_testing.servers import NatsServer, PostgresServer, RedisServer

from tests.chaos.plan import Fault, Step

#: What the foreign-publish fault writes: no change batch, so every consumer dead-letters it.
FOREIGN_BYTES = b"\xff\x00 written by a client that is not ingest"
from tests.e2e.harness import ServiceProcess, free_port
from tests.e2e.system import SOURCE, System, SystemConfig, write_config

PG_SETTINGS = {"logical_decoding_work_mem": "64kB"}  # big transactions are streamed (and aborted) by pgoutput
REDIS_OUTAGE = 20.0
STALL_BASE = 10.0  # a stall lasts this plus 5 x the step's pause
LEADER_WAIT = 30.0
DRAIN_GRACE = 5.0  # fan-outs serve their clients this long after SIGTERM (GoAway first)


@dataclass(frozen=True)
class ChaosSettings:
    seed: int
    work_dir: Path
    minutes: float | None = None  # None: the short run (every step once)
    cluster: bool = False
    rate: float = 150.0  # changes/s of the small transactions
    ready_timeout: float = 90.0
    converge_timeout: float = 180.0


@dataclass
class Exit:
    """A service that exited although nobody stopped it."""

    at: float
    service: str
    code: int | None
    log: str


class ChaosSystem:
    def __init__(self, settings: ChaosSettings, clock: Callable[[], float]) -> None:
        self.settings, self.clock = settings, clock
        work = settings.work_dir
        self.pg = PostgresServer(PG_SETTINGS)  # its own directory under /tmp, which the postgres user can reach
        self.redis = RedisServer(_dir(work / "redis"))
        self.nats: NatsServer | None = None
        self.cluster = None
        self.prefix = f"chaos{settings.seed}"
        self.table = TableId("public", "chaos_items")
        self.slot = f"slot_{self.prefix}"
        self.services: dict[str, ServiceProcess] = {}
        self.ports: dict[str, int] = {}
        self.proxy: FaultProxy | None = None
        self.dsn = ""
        self.exits: list[Exit] = []
        self.background: set[asyncio.Task[None]] = set()

    # -- start and stop -------------------------------------------------------------------------------------

    def start_servers(self) -> None:
        self.pg.start()
        self.dsn = self.pg.create_database("chaos")
        self.redis.start()
        if self.settings.cluster:
            from laredo_testing.nats_cluster import NatsCluster  # the 3-node cluster fixture

            # Not advertised: ingest's NATS client must not learn the nodes' own addresses and bypass the proxy
            self.cluster = NatsCluster(3, name=f"chaos{self.settings.seed}", advertise=False).start()
            nats_addresses = [u.removeprefix("nats://") for u in self.cluster.urls]
        else:
            self.nats = NatsServer(_dir(self.settings.work_dir / "nats")).start()
            nats_addresses = [self.nats.url.removeprefix("nats://")]
        self.proxy = FaultProxy(nats_addresses, name="ingest-to-nats").start()

    @property
    def nats_url(self) -> str:
        return self.cluster.url if self.cluster is not None else self.nats.url  # type: ignore[union-attr]

    def nats_logs(self) -> dict[str, Path]:
        """Where each NATS server's log is once the run is over (the cluster's directory is removed)."""
        if self.cluster is not None:
            return {node.server_name: self.settings.work_dir / f"{node.server_name}.log" for node in self.cluster.nodes}
        assert self.nats is not None
        return {"nats": self.nats.log_path}

    @property
    def stream(self) -> str:
        return stream_name(self.prefix, SOURCE)

    def start_services(self) -> None:
        assert self.proxy is not None
        work = self.settings.work_dir
        self.ports = {n: free_port() for n in ("fanout", "fanout-1", "query", "oam")}
        health = {n: free_port() for n in ("ingest", "fanout", "fanout-1", "query", "oam")}
        config = write_config(work / "laredo.conf", dsn=self.dsn, nats_url=self.nats_url, redis_url=self.redis.url,
                              prefix=self.prefix, table=self.table, ports=self.ports, health=health,
                              extra=SystemConfig(source="reconnect { initial_backoff = 200ms, max_backoff = 2s }"))
        ingest_args = ["--set", f"stream.nats_url=nats://{self.proxy.address}"]
        if self.settings.cluster:
            ingest_args += ["--set", "stream.replicas=3"]
        self.services = {
            "ingest": ServiceProcess("ingest", config, health["ingest"], work / "ingest.log", extra_args=ingest_args),
            "fanout-0": ServiceProcess("fanout", config, health["fanout"], work / "fanout-0.log",
                                       extra_args=["--drain-grace", f"{DRAIN_GRACE:g}s"]),
            "fanout-1": ServiceProcess("fanout", config, health["fanout-1"], work / "fanout-1.log", extra_args=[
                "--set", f"fanout.grpc.port={self.ports['fanout-1']}",
                "--set", f"fanout.health_port={health['fanout-1']}", "--drain-grace", f"{DRAIN_GRACE:g}s"]),
            "query": ServiceProcess("query", config, health["query"], work / "query.log"),
        }
        for service in self.services.values():
            service.start()
        for service in self.services.values():
            service.wait_ready(self.settings.ready_timeout)

    @property
    def fanout_addresses(self) -> list[str]:
        return [f"127.0.0.1:{self.ports['fanout']}", f"127.0.0.1:{self.ports['fanout-1']}"]

    def view(self) -> System:
        """The e2e System view of this system, for its query helpers."""
        return System(self.dsn, self.nats_url, self.prefix, self.table, {"query": self.ports["query"]}, {})

    def stop_services(self) -> dict[str, int | None]:
        """SIGTERM each service (SIGKILL after 15s); their exit codes (-9: had to be killed)."""
        codes = {}
        for name, service in reversed(self.services.items()):
            service.stop()
            codes[name] = service.proc.returncode if service.proc is not None else None
        return codes

    def close(self) -> None:
        for service in self.services.values():
            service.stop()
        if self.cluster is not None:
            for node, kept in zip(self.cluster.nodes, self.nats_logs().values(), strict=True):
                if node.log_path.exists():
                    shutil.copyfile(node.log_path, kept)
        for closable in (self.proxy, self.cluster, self.nats, self.redis):
            if closable is not None:
                closable.close()
        if self.pg.running and self.dsn:
            self.drop_slot()
        if self.pg.log_path.exists():
            shutil.copyfile(self.pg.log_path, self.pg_log)
        self.pg.close()

    @property
    def pg_log(self) -> Path:
        """Where PostgreSQL's log is kept once the run is over (its cluster directory is removed)."""
        return self.settings.work_dir / "postgres.log"

    def drop_slot(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND active_pid IS NOT NULL", (self.slot,))

    # -- health ---------------------------------------------------------------------------------------------

    def supervise(self) -> list[Exit]:
        """Record and restart every service that exited by itself (as an orchestrator would)."""
        found = []
        for name, service in self.services.items():
            if service.proc is not None and service.proc.poll() is not None:
                found.append(Exit(self.clock(), name, service.proc.returncode, service.log_tail(25)))
                service.start()
        self.exits.extend(found)
        return found

    def unhealthy(self) -> list[str]:
        """Services not answering /health/ready with 200 (each with why)."""
        bad = []
        for name, service in self.services.items():
            try:
                if not service.ready():
                    bad.append(f"{name}: /health/ready is not 200")
            except AssertionError as exc:
                bad.append(f"{name}: {str(exc).splitlines()[0]}")
        return bad

    async def all_ready(self, timeout: float) -> None:
        for service in self.services.values():
            await asyncio.to_thread(service.wait_ready, timeout)

    # -- faults ---------------------------------------------------------------------------------------------

    async def inflict(self, step: Step) -> str:
        """Carry out one fault of the plan and wait until the system is back; returns what happened."""
        fault = step.action
        assert isinstance(fault, Fault)
        if fault is Fault.KILL_INGEST:
            return await self._kill("ingest", step.pause)
        if fault is Fault.KILL_FANOUT:
            return await self._kill(f"fanout-{step.choice % 2}", step.pause)
        if fault is Fault.KILL_QUERY:
            return await self._kill("query", step.pause)
        if fault is Fault.TERMINATE_WALSENDER:
            return await asyncio.to_thread(self._terminate_walsender)
        if fault is Fault.RESTART_POSTGRES:
            mode = "immediate" if step.choice % 2 else "fast"
            await asyncio.to_thread(self.pg.restart, mode)
            return f"PostgreSQL stopped ({mode}) and started again"
        if fault is Fault.RESTART_NATS:
            return await self._restart_nats(step)
        if fault is Fault.KILL_STREAM_LEADER:
            return await self._kill_stream_leader(step)
        if fault is Fault.STOP_REDIS:
            await asyncio.to_thread(self.redis.stop)
            self.later(REDIS_OUTAGE, self.redis.start)
            return f"Redis stopped; it starts again (empty) in {REDIS_OUTAGE:g}s"
        if fault is Fault.DROP_PUBLISH:
            return await self._drop_publish()
        if fault is Fault.FOREIGN_PUBLISH:
            return await self._foreign_publish(step.pause)
        assert fault is Fault.CUT_PUBLISH, fault
        assert self.proxy is not None
        return f"reset {self.proxy.cut()} connection(s) of ingest to NATS"

    async def _kill(self, name: str, down: float) -> str:
        service = self.services[name]
        assert service.proc is not None
        pid = service.proc.pid
        await asyncio.to_thread(service.kill)
        await asyncio.sleep(down)  # how long the process stays dead is part of the fault
        service.start()
        started = self.clock()
        await asyncio.to_thread(service.wait_ready, self.settings.ready_timeout)
        return f"SIGKILL {name} (pid {pid}); down {down:.1f}s; ready {self.clock() - started:.1f}s after restart"

    async def drain(self, name: str) -> str:
        """SIGTERM (the service drains and exits by itself), then start it again."""
        service = self.services[name]
        proc = service.proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        began = self.clock()
        await eventually(lambda: proc.poll() is not None, timeout=DRAIN_GRACE + 20, interval=0.1,
                         what=f"{name} to drain its clients and exit after SIGTERM (log: {service.log_path})")
        if proc.returncode != 0:
            raise AssertionError(f"{name} exited with {proc.returncode} after SIGTERM:\n{service.log_tail(15)}")
        drained = self.clock() - began
        service.start()
        await asyncio.to_thread(service.wait_ready, self.settings.ready_timeout)
        return f"{name} drained and exited in {drained:.1f}s; ready {self.clock() - began - drained:.1f}s later"

    def _terminate_walsender(self) -> str:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            pids = [r[0] for r in conn.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s AND active_pid IS NOT NULL",
                (self.slot,))]
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return f"terminated walsender pid {pids[0]}" if pids else "no walsender was active on the slot"

    async def _restart_nats(self, step: Step) -> str:
        if self.cluster is not None:
            node = self.cluster.nodes[step.choice % len(self.cluster.nodes)]
            await asyncio.to_thread(node.kill)
            await asyncio.sleep(step.pause)
            await asyncio.to_thread(self.cluster.start)
            return f"SIGKILL {node.server_name}; down {step.pause:.1f}s; cluster healthy again"
        nats = self.nats
        assert nats is not None and nats.pid is not None
        how = "SIGKILL" if step.choice % 2 else "SIGTERM"
        if how == "SIGKILL":
            os.kill(nats.pid, signal.SIGKILL)
        await asyncio.to_thread(nats.stop)
        await asyncio.sleep(step.pause)
        await asyncio.to_thread(nats.start)
        return f"NATS stopped by {how}; down {step.pause:.1f}s; started again"

    async def _kill_stream_leader(self, step: Step) -> str:
        assert self.cluster is not None
        leader = await asyncio.to_thread(self.cluster.stream_leader, self.stream, LEADER_WAIT)
        await asyncio.to_thread(leader.kill)
        await asyncio.sleep(step.pause)
        await asyncio.to_thread(self.cluster.start)
        return f"SIGKILL stream leader {leader.server_name}; down {step.pause:.1f}s; cluster healthy again"

    async def _drop_publish(self) -> str:
        proxy = self.proxy
        assert proxy is not None
        proxy.drop_next_upstream()
        await eventually(lambda: not proxy.dropping, timeout=30, interval=0.05,
                         what="ingest to write to NATS, so that the proxy can drop it")
        return "dropped ingest's next write to NATS and reset the connection"

    async def _foreign_publish(self, hold: float) -> str:
        """Ingest's writes wait in the proxy while another client's message reaches the stream first: it takes
        the sequence ingest's first held message names, whose successors may then be stored ahead of it."""
        proxy = self.proxy
        assert proxy is not None
        held = proxy.held_chunks
        proxy.hold_upstream()
        try:
            await eventually(lambda: proxy.held_chunks > held, timeout=30, interval=0.05,
                             what="ingest to write to NATS while its writes are held")
            await asyncio.sleep(min(hold, 1.0))  # more of ingest's messages pile up behind the first
            client = await nats.connect(self.nats_url)
            try:
                await client.jetstream().publish(table_subject(self.prefix, SOURCE, self.table), FOREIGN_BYTES)
            finally:
                await client.close()
        finally:
            proxy.release_upstream()
        return f"wrote {len(FOREIGN_BYTES)} foreign bytes to the stream ahead of ingest's held writes"

    def later(self, delay: float, action: Callable[[], object]) -> None:
        async def run() -> None:
            await asyncio.sleep(delay)  # the length of the outage is part of the fault
            await asyncio.to_thread(action)

        task = asyncio.create_task(run())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def quiesce(self) -> None:
        """Wait for background fault windows (a Redis outage, a stall) to close."""
        await asyncio.gather(*list(self.background))

    async def cancel_background(self) -> None:
        tasks = list(self.background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path
