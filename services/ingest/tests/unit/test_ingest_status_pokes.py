"""Ingest reports each phase change to the coordination store at once (the heartbeat's poke), in order."""

from __future__ import annotations

import asyncio

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.status_reports import instance_from_event

from laredo_ingest.application.control import IngestControl
from laredo_ingest.application.coordination import CoordinationSettings, IngestCoordinator
from laredo_ingest.application.status import IngestPhase, IngestStatus

# A 30 s heartbeat: what a watcher sees within the test comes from the pokes.
SETTINGS = CoordinationSettings(leader_election=True, commands=False, heartbeats=True, lease_ttl=2.0,
                                lease_renew_every=0.5, heartbeat_interval=30.0)


async def test_phase_changes_are_announced_in_order_as_they_happen() -> None:
    store = InMemoryCoordinationStore(block=0.05)
    events = store.events()
    await events.join()
    status = IngestStatus()
    coordinator = IngestCoordinator(store, SETTINGS, source_id="main", instance_id="i1", status=status,
                                    control=IngestControl())
    stop = asyncio.Event()

    async def service(stopping: asyncio.Event) -> None:
        for phase, complete in ((IngestPhase.STARTING, False), (IngestPhase.BASELINE, False),
                                (IngestPhase.STREAMING, True)):  # a baseline of no time at all
            status.phase, status.baseline_complete = phase, complete
            status.changed()
        await stopping.wait()

    task = asyncio.create_task(coordinator.run(stop, service))
    phases: list[tuple[str, bool, bool]] = []
    try:
        while ("streaming", True, True) not in phases:
            instance = instance_from_event(await asyncio.wait_for(anext(events), 5))
            assert instance is not None and instance.service == "ingest" and instance.status["source"] == "main"
            report = instance.status
            phases.append((report["phase"], report["baseline_complete"], report["leader"]))
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        await events.aclose()
    # The standby phase (with the first heartbeat), leadership, then each phase of the service in order.
    assert phases[-3:] == [("starting", False, True), ("baseline", False, True), ("streaming", True, True)]
    assert phases[0][0] == "standby"
    assert status.on_change is None, "no poke once the heartbeat stopped"
