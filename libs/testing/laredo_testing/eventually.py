"""Wait for a condition with a deadline, naming the condition when it never holds."""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

_UNSET: Any = object()


@dataclass
class _Attempts:
    """The last outcome of a polled predicate, for the timeout message."""

    count: int = 0
    value: Any = _UNSET
    error: BaseException | None = None
    hung: bool = False

    def saw(self, value: Any = _UNSET, error: BaseException | None = None, hung: bool = False) -> None:
        self.count += 1
        self.value, self.error, self.hung = value, error, hung

    def timeout_error(self, what: str, timeout: float) -> AssertionError:
        if self.hung:
            last = "the last call was still running at the deadline"
        elif self.error is not None:
            last = f"last attempt raised {self.error!r}"
        elif self.value is _UNSET:
            last = "the predicate never returned"
        else:
            last = f"last value {self.value!r}"
        return AssertionError(f"timed out after {timeout:g}s waiting for {what} ({self.count} attempts; {last})")


def _describe(predicate: Callable[..., Any], what: str | None) -> str:
    return what or getattr(predicate, "__name__", None) or repr(predicate)


@overload
async def eventually(predicate: Callable[[], Awaitable[T]], *, timeout: float = ..., interval: float = ...,
                     what: str | None = ...) -> T: ...


@overload
async def eventually(predicate: Callable[[], T], *, timeout: float = ..., interval: float = ...,
                     what: str | None = ...) -> T: ...


async def eventually(predicate: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02,
                     what: str | None = None) -> Any:
    """Poll `predicate` (sync or async) until it returns a truthy value, and return that value.

    Exceptions raised by the predicate (including failed asserts) count as "not yet"; if the
    deadline passes, AssertionError names `what` and the last value or exception seen.
    """
    name = _describe(predicate, what)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    attempts = _Attempts()
    while True:
        # The deadline also bounds a single call, so a hung predicate cannot hang the test.
        scope = asyncio.timeout_at(deadline)
        try:
            async with scope:
                result = predicate()
                value = await result if inspect.isawaitable(result) else result
        except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
            hung = scope.expired()
            attempts.saw(error=None if hung else exc, hung=hung)
        else:
            if value:
                return value
            attempts.saw(value)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise attempts.timeout_error(name, timeout) from attempts.error
        await asyncio.sleep(min(interval, remaining))


def wait_until(predicate: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.02,
               what: str | None = None) -> T:
    """Blocking twin of `eventually` for synchronous code (fixtures, server start-up)."""
    name = _describe(predicate, what)
    deadline = time.monotonic() + timeout
    attempts = _Attempts()
    while True:
        try:
            value = predicate()
        except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
            attempts.saw(error=exc)
        else:
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()
                raise TypeError(f"wait_until got an awaitable from {name}; use eventually()")
            if value:
                return value
            attempts.saw(value)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise attempts.timeout_error(name, timeout) from attempts.error
        time.sleep(min(interval, remaining))
