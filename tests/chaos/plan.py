"""The seeded schedule of a chaos run: which fault or workload event happens when, decided before anything runs.

A plan depends only on the seed, the length asked for and whether NATS is a cluster, so a failing seed
replays the same statements and the same faults in the same order; the timing of the real processes (how
long a restart takes, where in a transaction a kill lands) still differs from run to run.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from tests.chaos.workload import Event

WARM_UP = 4.0  # seconds of plain load before the first step
SHORT_GAP = (1.5, 4.0)  # seconds between steps in the short run
LONG_GAP = (3.0, 12.0)


class Fault(enum.Enum):
    KILL_INGEST = "SIGKILL laredo-ingest"
    KILL_FANOUT = "SIGKILL a laredo-fanout"
    DRAIN_FANOUT = "SIGTERM a laredo-fanout (GoAway, drain, exit), then start it again"
    KILL_QUERY = "SIGKILL laredo-query"
    TERMINATE_WALSENDER = "pg_terminate_backend(walsender of ingest's slot)"
    RESTART_POSTGRES = "restart PostgreSQL"
    RESTART_NATS = "restart NATS"
    KILL_STREAM_LEADER = "SIGKILL the NATS node leading the stream"
    STOP_REDIS = "stop Redis for 20s"
    DROP_PUBLISH = "drop a write of ingest to NATS on the wire, then reset the connection"
    CUT_PUBLISH = "reset ingest's NATS connection mid-stream"
    FOREIGN_PUBLISH = "another client writes bytes to a table subject ahead of ingest's held writes"
    STALL_CLIENT = "a client stops reading"
    RESTART_CLIENT = "a client restarts from its local snapshot"


Action = Fault | Event


@dataclass(frozen=True)
class Step:
    at: float  # seconds after the load started, at the earliest (after the previous step finished)
    action: Action
    choice: int  # which instance, or which way (see the harness): drawn from the seed like everything else
    pause: float  # seconds a killed process stays down, or a stall lasts

    def describe(self) -> str:
        return f"t>={self.at:6.1f}s {self.action.value} (choice {self.choice}, pause {self.pause:.1f}s)"


def faults_for(cluster: bool) -> list[Fault]:
    return [f for f in Fault if cluster or f is not Fault.KILL_STREAM_LEADER]


def make_plan(seed: int, *, minutes: float | None, cluster: bool) -> list[Step]:
    """The short run (minutes=None): every fault and every workload event once, in a seeded order. A long run:
    that, then random steps (faults three times as likely as events) until `minutes` are used."""
    rnd = random.Random(f"chaos-plan-{seed}")
    actions: list[Action] = [*faults_for(cluster), *Event]
    rnd.shuffle(actions)
    gap = SHORT_GAP if minutes is None else LONG_GAP
    steps, at = [], WARM_UP
    for action in actions:
        steps.append(_step(rnd, at, action))
        at += rnd.uniform(*gap)
    if minutes is not None:
        faults, events = faults_for(cluster), list(Event)
        while at < minutes * 60:
            pool = faults if rnd.random() < 0.75 else events
            steps.append(_step(rnd, at, rnd.choice(pool)))
            at += rnd.uniform(*gap)
    return steps


def _step(rnd: random.Random, at: float, action: Action) -> Step:
    return Step(round(at, 1), action, rnd.randrange(1000), round(rnd.uniform(0.2, 3.0), 1))
