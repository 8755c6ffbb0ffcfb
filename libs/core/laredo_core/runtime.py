"""What every service's run() shares: listening with a clear error, serving until stopped (or until the task
that must run forever ends), and cancelling background work."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from laredo_kernel.errors import LaredoError

T = TypeVar("T")


async def listen(service: str, keys: str, starting: Awaitable[T]) -> T:
    """Await a server's start; a port that cannot be bound becomes an error naming the settings to change."""
    try:
        return await starting
    except OSError as exc:
        raise LaredoError(f"{service} cannot listen: {exc}; choose a free port with {keys} (0 picks one)") from exc


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


async def cancel(tasks: Iterable[asyncio.Task[None] | None]) -> None:
    """Cancel the tasks and wait until they are done (their errors are theirs to have logged)."""
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
