"""One chaos run: the system, library clients with protocol checkers, the seeded writer and the seeded plan of
faults; then, with the writer and the faults stopped, every replica must converge on SELECT *.

Clients (laredo_client.LaredoClient, as applications run it):
- `balanced`: through a round-robin balancer over both fan-outs, so every reconnect resumes by position on
  whichever instance it reaches;
- `pinned`: straight to fan-out 0, so it may resume by sequence on that one instance;
- `stalling`: through a proxy of its own that stops relaying to it for a while (a reader that stalls);
- `restarting`: through the balancer, saved to a local snapshot and restarted from it by the plan.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from laredo_client import BackoffPolicy, LaredoClient
from laredo_testing.eventually import eventually
from laredo_testing.fault_proxy import FaultProxy

from tests.chaos.harness import STALL_BASE, ChaosSettings, ChaosSystem
from tests.chaos.invariants import ProtocolChecker, monotonic_clock
from tests.chaos.plan import Fault, Step, make_plan
from tests.chaos.report import ChaosReport, StepRecord, differences
from tests.chaos.workload import Event, Writer, create_table, table_rows
from tests.e2e.system import as_struct_values, query_rows

log = logging.getLogger(__name__)

BACKOFF = BackoffPolicy(initial=0.05, maximum=1.0, jitter=0.5)
CLIENT_READY = 120.0
CLIENT_STEP = 90.0  # a restarted client must be ready within this
QUERY_DEADLINE = 30.0  # seconds for reading every row of the query service
GIVE_UP = 2  # faults in a row the system did not recover from, after which the rest of the plan is skipped
LOAD_TAIL = 8.0  # seconds the writer goes on after the last step


@dataclass
class ClientSlot:
    """One named replica: its current LaredoClient (a new one after each restart) and its checker."""

    name: str
    address: str
    checker: ProtocolChecker
    snapshot_path: Path | None = None
    client: LaredoClient | None = None

    async def start(self) -> None:
        self.client = LaredoClient(self.address, "public", "chaos_items", client_id=self.name, backoff=BACKOFF,
                                   local_snapshot_path=self.snapshot_path, stream_observer=self.checker)
        client = self.client
        self.checker.rebind(lambda: client.last_source_position)
        await client.start()

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.stop()

    def rows(self) -> dict[Any, dict[str, Any]]:
        assert self.client is not None
        return {row["id"]: row for row in self.client.all()}

    def describe(self) -> dict[str, Any]:
        assert self.client is not None
        c, s = self.client, self.client.stats
        return {"rows": c.count(), "position": c.last_source_position, "status": c.status,
                "failure": str(c.failure) if c.failure else None, "streams": s.streams_opened,
                "reconnects": s.reconnects, "handoffs": s.handoffs, "full_resyncs": s.full_resyncs,
                "applied": s.entries_applied, "skipped": s.entries_skipped, "gaps": s.sequence_gaps,
                "silent": s.silent_streams}


class ChaosRun:
    def __init__(self, settings: ChaosSettings) -> None:
        self.settings = settings
        self.clock = monotonic_clock()
        self.system = ChaosSystem(settings, self.clock)
        self.report = ChaosReport(settings, make_plan(settings.seed, minutes=settings.minutes,
                                                      cluster=settings.cluster))
        self.proxies: dict[str, FaultProxy] = {}
        self.slots: list[ClientSlot] = []
        self.writer: Writer | None = None

    async def run(self) -> ChaosReport:
        try:
            await self._set_up()
            await self._torment()
            await self._converge()
        except Exception as exc:  # noqa: BLE001 - the report says what stopped the run
            log.exception("chaos run stopped")
            self.report.error = "; ".join(filter(None, [self.report.error, f"{type(exc).__name__}: {exc}"]))
        finally:
            await self._tear_down()
        return self.report

    async def _set_up(self) -> None:
        system = self.system
        await asyncio.to_thread(system.start_servers)
        await asyncio.to_thread(create_table, system.dsn, str(system.table), random.Random(self.settings.seed))
        await asyncio.to_thread(system.start_services)
        self.report.logs = {name: s.log_path for name, s in system.services.items()}
        self.report.logs["postgres"] = system.pg_log
        self.report.logs.update(system.nats_logs())
        addresses = system.fanout_addresses
        self.proxies = {name: FaultProxy(addresses, name=name).start() for name in ("balancer", "stalling")}
        work = self.settings.work_dir
        self.slots = [
            self._slot("balanced", self.proxies["balancer"].address),
            self._slot("pinned", addresses[0]),
            self._slot("stalling", self.proxies["stalling"].address),
            self._slot("restarting", self.proxies["balancer"].address, work / "restarting-client.json"),
        ]
        self.report.checkers = [slot.checker for slot in self.slots]
        for slot in self.slots:
            await slot.start()
        for slot in self.slots:
            assert slot.client is not None
            await slot.client.await_ready(CLIENT_READY)

    def _slot(self, name: str, address: str, snapshot: Path | None = None) -> ClientSlot:
        return ClientSlot(name, address, ProtocolChecker(name, self.clock), snapshot)

    async def _torment(self) -> None:
        system, settings = self.system, self.settings
        self.writer = Writer(system.dsn, str(system.table), settings.seed, settings.rate, self.clock)
        self.report.writer = self.writer.stats
        origin = self.clock()
        self.writer.start()
        for step in self.report.plan:
            wait = origin + step.at - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)  # the plan's schedule
            self._check_writer()
            for exit_ in await asyncio.to_thread(system.supervise):
                log.warning("%s exited by itself (%s); restarted", exit_.service, exit_.code)
            await self._step(step)
            faults = [r for r in self.report.steps if isinstance(r.step.action, Fault)]
            if len(faults) >= GIVE_UP and not any(r.ok for r in faults[-GIVE_UP:]):
                self.report.error = (f"the system did not recover from {GIVE_UP} faults in a row; the other "
                                     f"{len(self.report.plan) - len(self.report.steps)} steps were skipped")
                break
        await asyncio.sleep(LOAD_TAIL)  # the last fault gets load behind it too
        self._check_writer()
        self.writer.stop()

    def _check_writer(self) -> None:
        assert self.writer is not None
        if self.writer.error is not None:
            raise AssertionError(f"the writer failed: {self.writer.error!r}") from self.writer.error

    async def _step(self, step: Step) -> None:
        started = self.clock()
        record = StepRecord(started, step, "")
        log.info("chaos step at t=%.1fs: %s", started, step.describe())
        try:
            if isinstance(step.action, Event):
                assert self.writer is not None
                self.writer.run_event(step.action)
                record.outcome = "handed to the writer (its outcome is listed with the writer's)"
            elif step.action is Fault.STALL_CLIENT:
                record.outcome = self._stall(step)
            elif step.action is Fault.RESTART_CLIENT:
                record.outcome = await self._restart_client()
            elif step.action is Fault.DRAIN_FANOUT:
                record.outcome = await self._drain_fanout(step)
            else:
                record.outcome = await self.system.inflict(step)
        except Exception as exc:  # noqa: BLE001 - recorded; the run goes on and the report fails it
            record.ok, record.outcome = False, f"{type(exc).__name__}: {str(exc)[:600]}"
        record.seconds = self.clock() - started
        self.report.steps.append(record)
        log.info("chaos step done: %s", record)

    def _stall(self, step: Step) -> str:
        """Odd choices also reset the client's connection: it reconnects into the stall, so its handshake and
        catch-up stall too (a session that must be bounded in every phase)."""
        proxy, seconds = self.proxies["stalling"], STALL_BASE + 5 * step.pause
        proxy.stall()
        self.system.later(seconds, proxy.resume)
        how = f"the stalling client receives nothing for {seconds:.0f}s"
        return f"{how}; its connection reset, it reconnects into the stall" if step.choice % 2 and proxy.cut() else how

    async def _drain_fanout(self, step: Step) -> str:
        """The draining instance leaves the balancers' rotation first, as behind a real load balancer."""
        index = step.choice % 2
        address = self.system.fanout_addresses[index]
        for proxy in self.proxies.values():
            proxy.in_rotation.discard(address)
        try:
            return await self.system.drain(f"fanout-{index}")
        finally:
            for proxy in self.proxies.values():
                proxy.in_rotation.add(address)

    async def _restart_client(self) -> str:
        slot = next(s for s in self.slots if s.snapshot_path is not None)
        before = slot.client.last_source_position if slot.client is not None else ""
        await slot.stop()
        await slot.start()
        assert slot.client is not None
        await slot.client.await_ready(CLIENT_STEP)
        return (f"{slot.name} stopped at {before or '(none)'} and restarted from its local snapshot; "
                f"ready (handshakes {slot.client.stats.modes})")

    async def _converge(self) -> None:
        system = self.system
        await system.quiesce()
        await asyncio.to_thread(system.supervise)
        stopped = self.clock()
        try:
            await system.all_ready(self.settings.ready_timeout)
        except AssertionError as exc:  # no point waiting for convergence: say how far everyone got
            self.report.error = self.report.error or str(exc).splitlines()[0]
            self.report.mismatches = await self._differences()
            self.report.unhealthy = await asyncio.to_thread(system.unhealthy)
            return
        last: dict[str, dict[str, Any]] = {}

        async def everyone_equal() -> bool:
            found = await self._differences()
            last.clear()  # only after a whole comparison: one cut short by the deadline leaves the previous
            last.update(found)
            return not found

        try:
            await eventually(everyone_equal, timeout=self.settings.converge_timeout, interval=2.0,
                             what="every client replica and the query service to equal SELECT *")
            self.report.converged_after = self.clock() - stopped
        except AssertionError as exc:
            self.report.mismatches = dict(last)
            if not last:  # no comparison finished: the reason is in the timeout's message
                self.report.error = str(exc)
        self.report.unhealthy = await asyncio.to_thread(system.unhealthy)

    async def _differences(self) -> dict[str, dict[str, Any]]:
        """Each consumer whose rows differ from SELECT * now, with how they differ."""
        system, found = self.system, {}
        expected = await asyncio.to_thread(table_rows, system.dsn, str(system.table))
        for slot in self.slots:
            if slot.client is None or slot.client.count() != len(expected) or slot.rows() != expected:
                found[f"client {slot.name}"] = differences(expected, slot.rows())
        try:
            held = await asyncio.wait_for(query_rows(system.view()), QUERY_DEADLINE)
        except (TimeoutError, grpc.aio.AioRpcError) as exc:
            found["query service"] = {"error": f"ListRows failed: {type(exc).__name__} {exc}"[:500]}
            return found
        wanted = {k: as_struct_values(v) for k, v in expected.items()}
        if held != wanted:
            found["query service"] = differences(wanted, held)
        return found

    async def _tear_down(self) -> None:
        self.report.clients = {s.name: s.describe() for s in self.slots if s.client is not None}
        if self.writer is not None and self.writer.error is None:
            try:
                self.writer.stop()
            except AssertionError as exc:
                self.report.error = self.report.error or str(exc)
        await self.system.cancel_background()
        for slot in self.slots:
            await slot.stop()
        for proxy in self.proxies.values():
            proxy.close()
        self.report.exits = list(self.system.exits)
        if not self.report.error:
            self.report.stop_codes = await asyncio.to_thread(self.system.stop_services)
        await asyncio.to_thread(self.system.close)


async def run_chaos(settings: ChaosSettings) -> ChaosReport:
    return await ChaosRun(settings).run()
