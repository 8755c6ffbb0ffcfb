"""Operator requests to a running ingest (from coordination commands or in-process): reload, pause, resume,
reset. Requests wait for their outcome; the streaming session carries them out between reads of frames.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from laredo_kernel.changes import TableId
from laredo_kernel.errors import LaredoError

from laredo_ingest.domain.baseline_reason import BaselineCause, BaselineReason

OPERATOR_RELOAD = BaselineReason(BaselineCause.OPERATOR_RELOAD, "requested by an operator (RELOAD)")


class ControlAbandoned(LaredoError):
    """A request was dropped because this instance stopped leading; retryable elsewhere."""

    retryable = True


class ControlAction(enum.Enum):
    RELOAD = "reload"
    PAUSE = "pause"
    RESUME = "resume"
    RESET = "reset"


@dataclass(slots=True)
class _Request:
    action: ControlAction
    tables: frozenset[TableId] = frozenset()  # RELOAD; empty = every configured table
    drop_publication: bool = False  # RESET
    detached: bool = False  # nobody waits for the outcome (asked for by ingest itself)
    reason: BaselineReason = OPERATOR_RELOAD  # RELOAD: why, as the status shows it
    done: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class IngestControl:
    """A queue of requests with one outcome each; `wakeup` is set while a request waits."""

    def __init__(self) -> None:
        self._queue: list[_Request] = []
        self.wakeup = asyncio.Event()
        #: Set by the running session: called when a request arrives, so it stops waiting for frames.
        self.on_submit: Callable[[], None] | None = None

    async def reload(self, tables: Iterable[TableId] = ()) -> str:
        """Re-baseline these tables (all when empty) without losing a change; returns once published."""
        return await self._submit(_Request(ControlAction.RELOAD, frozenset(tables)))

    async def pause(self) -> str:
        return await self._submit(_Request(ControlAction.PAUSE))

    async def resume(self) -> str:
        return await self._submit(_Request(ControlAction.RESUME))

    async def reset(self, *, drop_publication: bool = False) -> str:
        """Drop and recreate the slot (and the publication if asked), tell downstream, re-baseline."""
        return await self._submit(_Request(ControlAction.RESET, drop_publication=drop_publication))

    def submit_detached_reload(self, tables: Iterable[TableId], reason: BaselineReason) -> None:
        """A re-baseline nobody waits for (ingest's own: a schema change, one left unfinished by an earlier
        session), unless one is queued (it then takes these tables too, and keeps its reason)."""
        for queued in self._queue:
            if queued.action is ControlAction.RELOAD and queued.detached:
                queued.tables = queued.tables | frozenset(tables) if queued.tables and tables else frozenset()
                return
        request = _Request(ControlAction.RELOAD, frozenset(tables), detached=True, reason=reason)
        request.done.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
        self._queue.append(request)
        self._wake()

    def take(self) -> _Request | None:
        """The oldest waiting request, for the session to carry out and finish()."""
        request = self._queue.pop(0) if self._queue else None
        if not self._queue:
            self.wakeup.clear()
        return request

    def abandon(self, reason: str) -> None:
        """Fail every waiting request: this instance will not carry them out (their commands are delivered
        again to the instance that will)."""
        queued, self._queue = self._queue, []
        self.wakeup.clear()
        for request in queued:
            self.finish(request, ControlAbandoned(f"{request.action.value} not carried out: {reason}"))
            request.done.exception()  # whoever waited may be gone already: no "never retrieved" warning

    @staticmethod
    def finish(request: _Request, outcome: str | BaseException) -> None:
        if request.done.done():
            return
        if isinstance(outcome, BaseException):
            request.done.set_exception(outcome)
        else:
            request.done.set_result(outcome)

    async def _submit(self, request: _Request) -> str:
        self._queue.append(request)
        self._wake()
        return await request.done

    def _wake(self) -> None:
        self.wakeup.set()
        if self.on_submit is not None:
            self.on_submit()
