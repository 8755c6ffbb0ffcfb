"""The CoordinationStore port: registry, leases, commands and events between service instances (Redis in production).

The store is for control, never on the data path: when it is unavailable every method raises
CoordinationUnavailable (retryable) and callers keep moving data.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from laredo_kernel.errors import ErrorKind, LaredoError


class CoordinationUnavailable(LaredoError):
    """The coordination store cannot be reached; retry later. Data keeps flowing meanwhile."""

    kind = ErrorKind.UNAVAILABLE
    retryable = True


class CommandKind(enum.Enum):
    PAUSE = "pause"
    RESUME = "resume"
    RELOAD = "reload"  # re-baseline one table (args: schema, table) or all tables of a source
    RESET = "reset"  # drop and recreate the slot (args: drop_publication)
    DRAIN = "drain"  # fan-out: GoAway to clients (args: schema, table, deadline_unix_ms)
    SNAPSHOT = "snapshot"  # take a snapshot now (args: tables, user_meta)
    REPLAY_DEAD_LETTERS = "replay_dead_letters"  # re-apply dead letters (laredo_core.deadletters.replay)
    # Rebuild a table from a snapshot + the stream tail (fan-out, query; args: laredo_core.rebuild.records).
    RESTORE = "restore"
    REPLAY = "replay"  # the same, paced (args also: speed)
    STOP_REPLAY = "stop_replay"  # args: rebuild_id


class CommandStatus(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"  # not applicable to this instance (e.g. unknown table)


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    """What an instance reports about itself; `status` is a JSON-compatible mapping of its own choosing."""

    service: str  # ingest, fanout, query, oam, snapshot
    instance_id: str
    status: Mapping[str, Any] = field(default_factory=dict)
    heartbeat_unix_ms: int = 0
    started_unix_ms: int = 0  # when the instance started (its heartbeat was set up); 0 = not reported


@dataclass(frozen=True, slots=True)
class Command:
    """A command addressed to a target: 'ingest:<source_id>', 'fanout:<instance_id>', 'fanout:*', ..."""

    command_id: str
    target: str
    kind: CommandKind
    args: Mapping[str, Any] = field(default_factory=dict)
    issued_unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class CommandResult:
    command_id: str
    status: CommandStatus
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    executed_by: str = ""
    finished_unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class Event:
    """A state change for watchers (pipeline state, source state, service state, row counts)."""

    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    unix_ms: int = 0


class CoordinationStore(Protocol):
    """Registry, leases, commands and events shared by all Laredo instances.

    Registry: `heartbeat` stores an instance's status for `ttl` seconds; `instances` lists the live ones.
    Leases: `acquire_lease` succeeds for one holder at a time until its TTL lapses; `renew_lease` extends it
    only for the current holder (False = lost it: stop acting as leader at once); `release_lease` frees it.
    Commands: `send_command` appends durably and returns the command id; for a target, every command is
    delivered to exactly one consumer of a consumer group named after the target (a broadcast target such
    as 'fanout:*' is delivered to every instance that reads it with its own group); a command is redelivered
    until `complete_command` acknowledges it, so executing it must be idempotent by command_id;
    `command_result` waits (bounded) for the result.
    Events: `publish_event` is fire-and-forget fan-out to current watchers (no history).
    Every method raises CoordinationUnavailable when the store cannot be reached.
    """

    async def heartbeat(self, instance: InstanceStatus, ttl: float) -> None: ...

    async def deregister(self, service: str, instance_id: str) -> None: ...

    async def instances(self, service: str | None = None) -> list[InstanceStatus]: ...

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> bool: ...

    async def renew_lease(self, name: str, holder: str, ttl: float) -> bool: ...

    async def release_lease(self, name: str, holder: str) -> None: ...

    async def lease_holder(self, name: str) -> str | None: ...

    async def send_command(self, target: str, kind: CommandKind, args: Mapping[str, Any] | None = None) -> str: ...

    def commands(self, target: str, consumer: str, *, group: str | None = None) -> AsyncIterator[Command]: ...

    async def complete_command(self, command: Command, result: CommandResult) -> None: ...

    async def command_result(self, command_id: str, timeout: float) -> CommandResult | None: ...

    async def publish_event(self, event: Event) -> None: ...

    def events(self) -> AsyncIterator[Event]: ...
