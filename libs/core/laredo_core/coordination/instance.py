"""One instance of a service in the coordination store: its status heartbeat and the commands addressed to it.

Commands arrive for `<service>:*` (read as SharedTarget says) and `<service>:<instance_id>`. RESTORE, REPLAY and
STOP_REPLAY go to the instance's rebuilds (when it runs any), the rest to the service's `execute`; the result is
stored for the sender. A result that cannot be stored is logged: the command is then redelivered and executed
again, so every `execute` must be idempotent by command id. An unreachable store only delays heartbeats and
commands, never the data path.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from laredo_core.coordination.heartbeat import InstanceHeartbeat
from laredo_core.coordination.ports import (Command, CommandResult, CommandStatus, CoordinationStore,
                                            CoordinationUnavailable)
from laredo_core.runtime import run_together

if TYPE_CHECKING:
    from laredo_core.rebuild.instance import InstanceRebuilds

__all__ = ["CommandAnswer", "ExecuteCommand", "InstanceCoordinator", "SharedTarget"]

log = logging.getLogger(__name__)

#: What a service answers to one command: its status, a message for the operator and details (JSON values).
CommandAnswer = tuple[CommandStatus, str, Mapping[str, Any]]
#: Carries out one command of the service's own kinds (kinds it does not carry out: REJECTED). Idempotent by
#: command id; it raises nothing the service expects (those are FAILED or REJECTED answers).
ExecuteCommand = Callable[[Command], Awaitable[CommandAnswer]]
#: The service's own status for the heartbeat (JSON values), without the rebuilds' `replays`.
StatusFn = Callable[[], Mapping[str, Any]]
#: A loop the instance runs alongside its heartbeat, until cancelled (e.g. poking the heartbeat on changes).
Loop = Callable[[], Coroutine[Any, Any, None]]


class SharedTarget(enum.Enum):
    """Who reads the commands sent to `<service>:*`."""

    EVERY_INSTANCE = "every_instance"  # each instance with its own consumer group: a broadcast (fan-out, query)
    ONE_INSTANCE = "one_instance"  # one group for all instances: each command done once (the snapshot service)


class InstanceCoordinator:
    """Heartbeat and command loops of one instance; `run()` until cancelled, then it deregisters.

    `joined[target]` is set once the instance reads the target's commands (a broadcast reaches joined readers
    only). `heartbeat.poke()` reports a state change at once. With `rebuilds`, the heartbeat carries their
    report under `replays`, each start or end of a rebuild pokes it, and they are stopped before deregistering.
    """

    def __init__(self, store: CoordinationStore, service: str, instance_id: str, status: StatusFn,
                 execute: ExecuteCommand, *, heartbeat_interval: float = 5.0,
                 shared: SharedTarget = SharedTarget.EVERY_INSTANCE, rebuilds: InstanceRebuilds | None = None) -> None:
        self.service = service
        self.instance_id = instance_id
        self.shared = shared
        self.rebuilds = rebuilds
        self._store = store
        self._status = status
        self._execute = execute
        self.heartbeat = InstanceHeartbeat(store, service, instance_id, self.status,
                                           interval=heartbeat_interval, ttl=3 * heartbeat_interval)
        self.joined = {target: asyncio.Event() for target in self.command_targets}
        if rebuilds is not None:
            rebuilds.on_change = self.heartbeat.poke

    @property
    def command_targets(self) -> tuple[str, str]:
        """The shared target and this instance's own one."""
        return f"{self.service}:*", f"{self.service}:{self.instance_id}"

    async def run(self, *alongside: Loop) -> None:
        """Heartbeat, command loops and `alongside` until cancelled; on cancellation the instance deregisters."""
        shared, own = self.command_targets
        shared_group = f"{shared}:{self.instance_id}" if self.shared is SharedTarget.EVERY_INSTANCE else None
        try:
            await run_together(self.heartbeat.run(), *(loop() for loop in alongside),
                               self._serve(shared, group_name=shared_group), self._serve(own, group_name=None))
        finally:
            if self.rebuilds is not None:
                await asyncio.shield(self.rebuilds.aclose())
            await asyncio.shield(self.heartbeat.deregister())

    def status(self) -> Mapping[str, Any]:
        status = self._status()
        if self.rebuilds is None:
            return status
        return {**status, "replays": self.rebuilds.report()}

    async def execute(self, command: Command) -> CommandResult:
        """Answer one command (again, harmlessly, when it was answered before: see the module docstring)."""
        log.info("command %s (%s) from %s: %s", command.command_id, command.kind.value, command.target,
                 dict(command.args))
        if self.rebuilds is not None and (rebuilt := await self.rebuilds.execute(command)) is not None:
            return rebuilt
        status, message, details = await self._execute(command)
        return CommandResult(command.command_id, status, message, details, executed_by=self.instance_id,
                             finished_unix_ms=int(time.time() * 1000))

    async def _serve(self, target: str, group_name: str | None) -> None:
        subscription = self._store.commands(target, self.instance_id, group=group_name)
        try:
            with contextlib.suppress(CoordinationUnavailable):  # iteration keeps trying during an outage
                await subscription.join()
                self.joined[target].set()
            async for command in subscription:
                self.joined[target].set()
                result = await self.execute(command)
                try:
                    await self._store.complete_command(command, result)
                except CoordinationUnavailable as exc:
                    log.warning("result of command %s not stored (%s); it is redelivered and executed again",
                                command.command_id, exc)
        finally:
            await subscription.aclose()
