"""Commands to instances through the coordination store, their answers awaited together (bounded)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from laredo_core.coordination.ports import CommandKind, CommandResult

from laredo_oam.domain.errors import CommandTimedOut
from laredo_oam.ports import CoordinationStore


async def command_answers(store: CoordinationStore, commands: Sequence[tuple[str, CommandKind, Mapping[str, Any]]],
                          timeout: float, if_unanswered: str) -> list[tuple[str, CommandResult]]:
    """Send every (target, kind, args) command, then wait at most `timeout` for all the answers, in command
    order; CommandTimedOut names the targets that did not answer, then says `if_unanswered`."""
    sent = [(target, await store.send_command(target, kind, args)) for target, kind, args in commands]
    results = await asyncio.gather(*(store.command_result(cid, timeout) for _, cid in sent))
    missing = [target for (target, _), result in zip(sent, results, strict=True) if result is None]
    if missing:
        raise CommandTimedOut(f"no answer from {', '.join(missing)} within {timeout:g}s; {if_unanswered}")
    return [(target, result) for (target, _), result in zip(sent, results, strict=True) if result is not None]


def answer_lines(answers: Sequence[tuple[str, CommandResult]]) -> str:
    """`<target>: <status> (<message>)` per answer, joined by "; "."""
    return "; ".join(f"{target}: {r.status.value}" + (f" ({r.message})" if r.message else "") for target, r in answers)
