"""JSON forms of the coordination records (instance status, command, result, event), shared by every store."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus, Event, InstanceStatus


def now_unix_ms() -> int:
    return int(time.time() * 1000)


def to_json(what: str, record: Mapping[str, Any]) -> str:
    """Serialize `record` compactly, or say which value is not JSON-compatible and what to pass instead."""
    try:
        return json.dumps(record, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{what} is not JSON-compatible ({exc}); use str, int, float, bool, None, lists and string-keyed dicts"
        ) from exc


def check_name(what: str, value: str) -> str:
    """Names become parts of keys: reject empty ones and whitespace so keys stay readable and unambiguous."""
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"{what} {value!r} is not usable: give a non-empty name without whitespace")
    return value


def positive_seconds(what: str, seconds: float) -> float:
    if not seconds > 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {seconds!r}")
    return seconds


def new_command(target: str, kind: CommandKind, args: Mapping[str, Any] | None, issued_unix_ms: int) -> Command:
    """A command to send, under a fresh id; ValueError for a kind that is not a CommandKind or an unusable target."""
    if not isinstance(kind, CommandKind):
        raise ValueError(f"command kind {kind!r} is not a CommandKind; use one of {[k.name for k in CommandKind]}")
    return Command(uuid.uuid4().hex, check_name("command target", target), kind, dict(args or {}), issued_unix_ms)


def finished_result(command: Command, result: CommandResult, now_ms: int) -> CommandResult:
    """`result` stamped with when it finished (unless it says so); ValueError when it is another command's."""
    if result.command_id != command.command_id:
        raise ValueError(f"result for command {result.command_id} given to complete command "
                         f"{command.command_id}; pass the command's own result")
    return replace(result, finished_unix_ms=result.finished_unix_ms or now_ms)


def instance_record(instance: InstanceStatus) -> dict[str, Any]:
    """The JSON-compatible form a heartbeat stores and an `instance_status` event carries."""
    return {"service": instance.service, "instance_id": instance.instance_id, "status": dict(instance.status),
            "heartbeat_unix_ms": instance.heartbeat_unix_ms, "started_unix_ms": instance.started_unix_ms}


def instance_to_json(instance: InstanceStatus) -> str:
    return to_json(f"status of {instance.service} instance {instance.instance_id}", instance_record(instance))


def instance_from_json(text: str) -> InstanceStatus:
    data = json.loads(text)
    return InstanceStatus(data["service"], data["instance_id"], data.get("status") or {},
                          int(data.get("heartbeat_unix_ms", 0)), int(data.get("started_unix_ms", 0)))


def command_to_json(command: Command) -> str:
    return to_json(f"arguments of command {command.kind.value} to {command.target!r}", {
        "command_id": command.command_id, "target": command.target, "kind": command.kind.value,
        "args": dict(command.args), "issued_unix_ms": command.issued_unix_ms,
    })


def command_from_json(text: str) -> Command:
    """Parse a stored command; raises ValueError (or KeyError) for malformed entries."""
    data = json.loads(text)
    return Command(data["command_id"], data["target"], CommandKind(data["kind"]), data.get("args") or {},
                   int(data.get("issued_unix_ms", 0)))


def result_to_json(result: CommandResult) -> str:
    return to_json(f"result of command {result.command_id}", {
        "command_id": result.command_id, "status": result.status.value, "message": result.message,
        "details": dict(result.details), "executed_by": result.executed_by,
        "finished_unix_ms": result.finished_unix_ms,
    })


def result_from_json(text: str) -> CommandResult:
    data = json.loads(text)
    return CommandResult(data["command_id"], CommandStatus(data["status"]), data.get("message", ""),
                         data.get("details") or {}, data.get("executed_by", ""),
                         int(data.get("finished_unix_ms", 0)))


def event_to_json(event: Event) -> str:
    return to_json(f"payload of event {event.kind!r}",
                   {"kind": event.kind, "payload": dict(event.payload), "unix_ms": event.unix_ms})


def event_from_json(text: str) -> Event:
    data = json.loads(text)
    return Event(data["kind"], data.get("payload") or {}, int(data.get("unix_ms", 0)))
