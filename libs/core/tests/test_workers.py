"""The launcher of `--workers N`: each worker's command line, the port held for them, a refused configuration."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from laredo_core.config import ServiceEndpoint
from laredo_core.workers import WorkerPlan, hold_port, run_workers, worker_arguments
from laredo_kernel.errors import ConfigError
from laredo_testing.process import free_ports_in_a_row


def endpoint(**overrides: Any) -> ServiceEndpoint:
    return dataclasses.replace(ServiceEndpoint(health_port=8082, instance_id="edge"), **overrides)


def test_each_worker_gets_the_held_port_its_own_health_port_and_instance_id() -> None:
    plan = WorkerPlan("laredo_fanout.main", "fanout", 3, ["--config", "f.conf", "--workers", "3"], 15.0)
    args = worker_arguments(plan, endpoint(), 2, 4002)
    assert args[:3] == [sys.executable, "-m", "laredo_fanout.main"]
    # the launcher's own arguments first: the worker's come later and win
    assert args[3:] == ["--config", "f.conf", "--workers", "3", "--workers", "1", "--worker-index", "2",
                        "--set", "fanout.grpc.port=4002", "--set", "fanout.health_port=8085",
                        "--set", "fanout.instance_id=edge-w2"]
    # the launcher cannot ask its workers (health requires client certificates): health_port is worker 0's
    assert "fanout.health_port=8084" in worker_arguments(plan, endpoint(), 2, 4002, health_offset=0)


def test_unconfigured_ports_and_ids_stay_the_workers_own() -> None:
    plan = WorkerPlan("laredo_query.main", "query", 2, [], 15.0)
    args = worker_arguments(plan, endpoint(health_port=0, instance_id=""), 1, 4003)
    assert "query.health_port=0" in args
    assert not any(a.startswith("query.instance_id") for a in args)  # a fresh one each: host, pid, random


def test_the_held_port_admits_workers_and_refuses_other_programs() -> None:
    held = hold_port("127.0.0.1", 0)
    port = held.getsockname()[1]
    try:
        worker = socket.socket()
        worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        worker.bind(("127.0.0.1", port))
        worker.listen()
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            accepted, _ = worker.accept()  # the held socket takes no connections: the worker gets them
            accepted.close()
        worker.close()
    finally:
        held.close()


async def test_a_worker_that_refuses_its_configuration_stops_the_launch(tmp_path: Path) -> None:
    missing = tmp_path / "missing.conf"
    plan = WorkerPlan("laredo_query.main", "query", 2, ["--config", str(missing)], 5.0)
    with pytest.raises(ConfigError, match="refused its configuration"):
        await asyncio.wait_for(run_workers("laredo-query", plan, endpoint(health_port=0), asyncio.Event()), 60)


async def test_a_health_port_a_worker_cannot_have_is_refused_before_any_worker_starts() -> None:
    first = free_ports_in_a_row(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first + 2))
        taken.listen()
        plan = WorkerPlan("laredo_query.main", "query", 2, [], 5.0)
        with pytest.raises(ConfigError, match=rf"worker 1 of 2 serves health on 127.0.0.1:{first + 2} "
                                              r"\(query.health_port \+ 2\), which is taken"):
            await run_workers("laredo-query", plan, endpoint(health_port=first), asyncio.Event())
