"""eventually() and wait_until(): return the first truthy value, or fail naming the condition."""

from __future__ import annotations

import asyncio
import itertools
import re
import time

import pytest

from laredo_testing.eventually import eventually, wait_until


async def test_returns_first_truthy_value_of_a_sync_predicate() -> None:
    calls = itertools.count()
    assert await eventually(lambda: next(calls) >= 3 and "ready", timeout=2.0, interval=0.001) == "ready"


async def test_awaits_an_async_predicate() -> None:
    calls = itertools.count()

    async def third_call() -> int:
        return next(calls) if next(calls) >= 4 else 0

    assert await eventually(third_call, timeout=2.0, interval=0.001) >= 4


async def test_timeout_names_the_condition_and_last_value() -> None:
    with pytest.raises(AssertionError, match=r"waiting for slot to be active .*last value \[\]"):
        await eventually(lambda: [], timeout=0.05, what="slot to be active")


async def test_timeout_reports_and_chains_the_last_exception() -> None:
    def boom() -> bool:
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(AssertionError, match="nobody home") as excinfo:
        await eventually(boom, timeout=0.05, what="server to answer")
    assert isinstance(excinfo.value.__cause__, ConnectionRefusedError)


async def test_a_hung_async_predicate_is_cut_off_at_the_deadline() -> None:
    async def hangs() -> bool:
        await asyncio.Event().wait()
        return True

    started = time.monotonic()
    with pytest.raises(AssertionError, match="waiting for hangs .*still running at the deadline"):
        await eventually(hangs, timeout=0.1)
    assert time.monotonic() - started < 2.0


async def test_failed_asserts_inside_the_predicate_mean_not_yet() -> None:
    seen: list[int] = []

    def has_two() -> bool:
        seen.append(1)
        assert len(seen) >= 2, "only one"
        return True

    assert await eventually(has_two, timeout=2.0, interval=0.001)


def test_wait_until_returns_value_and_names_condition_on_timeout() -> None:
    calls = itertools.count()
    assert wait_until(lambda: next(calls) == 2, timeout=2.0, interval=0.001) is True
    with pytest.raises(AssertionError, match=re.escape("waiting for queue drained (")):
        wait_until(lambda: 0, timeout=0.05, what="queue drained")


def test_wait_until_refuses_async_predicates() -> None:
    async def ready() -> bool:
        return True

    with pytest.raises(TypeError, match="use eventually"):
        _ = wait_until(ready, timeout=0.05)
