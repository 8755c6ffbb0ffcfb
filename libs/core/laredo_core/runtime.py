"""What every service's run() shares: ServiceRun, serving until stopped or failed, cancelling background work."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

from laredo_kernel.errors import LaredoError

log = logging.getLogger(__name__)

T = TypeVar("T")


class ServiceRun(contextlib.AsyncExitStack):
    """One run of a service: what it starts is stopped in reverse order (last started, first stopped), however
    the run ends (stopped, its essential task failed, start-up failed, cancelled).

    So every service's shutdown order follows from its start-up order: health first (liveness answers while the
    rest starts) and stopped last; the change feed before the gRPC server, so it is cancelled after the server
    stops; what must happen first when stopping (drain clients, end subscriptions) registered right after the
    server starts. `on_stopping` runs before anything is stopped (readiness turns false). A step that fails does
    not keep the others from running; its error is raised once all have run.
    """

    def __init__(self, service: str, on_stopping: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self._service = service
        self._on_stopping = on_stopping

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> bool:
        self._on_stopping()
        return await super().__aexit__(kind, error, trace)

    async def listen(self, keys: str, starting: Awaitable[T], stop: Callable[[T], Awaitable[Any]]) -> T:
        """A server started (a port that cannot be bound becomes an error naming `keys`, the settings to change);
        `stop(server)` when ending."""
        try:
            server = await starting
        except OSError as exc:
            raise LaredoError(f"{self._service} cannot listen: {exc}; choose a free port with {keys} "
                              "(0 picks one)") from exc
        self.push_async_callback(stop, server)
        return server

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A background task, cancelled (and awaited) when the run ends."""
        task = asyncio.create_task(work, name=name)
        self.push_async_callback(cancel, [task])
        return task

    def on_stop(self, step: Callable[..., Any], *args: Any) -> None:
        """`step(*args)` (a function or a coroutine function) runs when the run ends, before what started
        earlier is stopped."""
        self.push_async_callback(_call, step, *args)


async def _call(step: Callable[..., Any], *args: Any) -> None:
    result = step(*args)
    if inspect.isawaitable(result):
        await result


async def until_stopped_or_failed(stop: asyncio.Event, essential: asyncio.Task[None],
                                  what: str = "the change feed") -> None:
    """Return when `stop` is set; raise when `essential` (which runs until stopped) ends first."""
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((stopped, essential), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if essential.done():
        essential.result()  # one that ends on its own failed: raise its error
        raise RuntimeError(f"{what} stopped without an error; it should run until stopped")


#: Seconds a cancelled task has to end before it is cancelled again.
CANCEL_AGAIN_AFTER = 1.0


async def cancel(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel the tasks and wait until they are done (their errors are theirs to have logged).

    A task still running after CANCEL_AGAIN_AFTER is cancelled again: Python 3.11's asyncio.wait_for (which
    nats-py awaits its requests with) loses a cancellation that arrives just as the awaited reply does, and a
    loop that retries what failed would then run on for ever.
    """
    pending = {t for t in tasks if t is not None}
    rounds = 0
    while pending:
        for task in pending:
            task.cancel()
        done, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN_AFTER)
        for task in done:
            if not task.cancelled():
                task.exception()  # read, so asyncio does not report it again as never retrieved
        if pending:
            rounds += 1
            log.warning("%d task(s) still running after being cancelled (%s); cancelling again", len(pending),
                        ", ".join(sorted(t.get_name() for t in pending)))
            if rounds == 3:  # where they wait, once: what holds a task that does not end
                for task in pending:
                    log.warning("task %s still waits at:\n%s", task.get_name(), _where(task))


def _where(task: asyncio.Task[Any]) -> str:
    """The task's chain of awaits, outermost first (Task.get_stack shows only the outermost coroutine)."""
    lines, awaited = [], task.get_coro()
    while awaited is not None and len(lines) < 40:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None and not hasattr(awaited, "cr_await"):
            lines.append(f"  awaiting {awaited!r:.200}\n")  # a future, or something that is not a coroutine
            break
        if frame is not None:
            lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}\n")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return "".join(lines) or "  (no frame)\n"


async def run_together(*work: Coroutine[Any, Any, Any]) -> None:
    """Run the coroutines side by side until all end; the first failure cancels the rest and is raised. What
    asyncio.TaskGroup does, except that a cancellation reaches every coroutine again until it ends (see cancel()):
    a TaskGroup cancels its tasks once, and one that lost that cancellation would hold it, and its caller, for
    ever."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in work]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        await cancel([task for task in tasks if not task.done()])
