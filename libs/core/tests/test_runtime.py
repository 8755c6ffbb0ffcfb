"""The pieces every service's run() shares (laredo_core.runtime)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from laredo_core import runtime
from laredo_core.runtime import ServiceRun, cancel, run_together, until_stopped_or_failed
from laredo_kernel.errors import LaredoError


async def test_a_port_in_use_names_the_settings_to_change() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(LaredoError, match=r"fan-out cannot listen: .*fanout\.grpc\.port.*\(0 picks one\)"):
            async with ServiceRun("fan-out") as run:
                await run.listen("fanout.grpc.port", asyncio.start_server(lambda r, w: None, "127.0.0.1", port),
                                 asyncio.Server.wait_closed)
    finally:
        taken.close()


async def test_serving_ends_when_stopped() -> None:
    stop, essential = asyncio.Event(), asyncio.create_task(asyncio.sleep(60))
    asyncio.get_running_loop().call_later(0.01, stop.set)
    await until_stopped_or_failed(stop, essential)
    assert not essential.done()
    await cancel([essential, None])
    assert essential.cancelled()


async def test_an_essential_task_that_fails_or_ends_ends_serving_with_its_error() -> None:
    async def fails() -> None:
        raise LaredoError("the feed broke")

    with pytest.raises(LaredoError, match="the feed broke"):
        await until_stopped_or_failed(asyncio.Event(), asyncio.create_task(fails()))
    with pytest.raises(RuntimeError, match="the change feed stopped without an error"):
        await until_stopped_or_failed(asyncio.Event(), asyncio.create_task(asyncio.sleep(0)))


async def test_a_run_stops_what_it_started_in_reverse_order_even_when_a_step_fails() -> None:
    done: list[str] = []

    async def started(name: str) -> str:
        return name

    async def stop_server(name: str) -> None:
        done.append(f"stop {name}")

    def fails() -> None:
        done.append("fails")
        raise RuntimeError("cannot close")

    with pytest.raises(RuntimeError, match="cannot close"):
        async with ServiceRun("test", on_stopping=lambda: done.append("unready")) as run:
            await run.listen("test.port", started("health"), stop_server)
            run.on_stop(fails)
            background = run.spawn(asyncio.sleep(60), "background")
            await run.listen("test.port", started("grpc"), stop_server)
            run.on_stop(done.append, "drain")
    assert done == ["unready", "drain", "stop grpc", "fails", "stop health"]
    assert background.cancelled()


async def test_a_run_whose_start_fails_stops_only_what_had_started() -> None:
    done: list[str] = []
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with pytest.raises(LaredoError, match="test.grpc.port"):
            async with ServiceRun("test") as run:
                run.on_stop(done.append, "health stopped")
                await run.listen("test.grpc.port", asyncio.start_server(
                    lambda r, w: None, "127.0.0.1", taken.getsockname()[1]), lambda server: done.append("never"))
    finally:
        taken.close()
    assert done == ["health stopped"]


async def test_closing_quietly_takes_plain_and_coroutine_functions_and_never_raises(
        caplog: pytest.LogCaptureFixture) -> None:
    from laredo_core.shutdown import close_quietly

    closed: list[str] = []

    async def closes() -> None:
        closed.append("async")

    def fails() -> None:
        closed.append("plain")
        raise ConnectionError("server gone")

    await close_quietly("the store", closes)
    await close_quietly("the session", fails)
    assert closed == ["async", "plain"]
    assert "the session: closing failed (ConnectionError: server gone)" in caplog.text


async def loses_one_cancellation(lost: list[bool]) -> None:
    """Sleeps on after its first cancellation (as Python 3.11's asyncio.wait_for can lose one, and a loop that
    retries goes on); ends at the next."""
    while True:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            if lost:
                raise
            lost.append(True)


async def test_cancel_cancels_again_a_task_that_lost_its_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "CANCEL_AGAIN_AFTER", 0.05)
    lost: list[bool] = []
    task = asyncio.create_task(loses_one_cancellation(lost))
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel([task, None]), 5)
    assert task.cancelled() and lost


async def test_a_task_that_keeps_losing_its_cancellation_is_shown_where_it_waits(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(runtime, "CANCEL_AGAIN_AFTER", 0.02)
    lost = []

    async def deep_wait() -> None:
        await asyncio.sleep(10)

    async def swallowing_four_times() -> None:
        while True:
            try:
                await deep_wait()
            except asyncio.CancelledError:
                if len(lost) == 4:
                    raise
                lost.append(True)

    task = asyncio.create_task(swallowing_four_times(), name="stubborn")
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel([task]), 5)
    assert task.cancelled()
    assert caplog.text.count("task stubborn still waits at:") == 1  # once, after the third round
    assert "in swallowing_four_times" in caplog.text and "in deep_wait" in caplog.text


async def test_run_together_reaches_a_coroutine_that_lost_its_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio.TaskGroup cancels its tasks once: one that lost that cancellation would hold its caller for ever."""
    monkeypatch.setattr(runtime, "CANCEL_AGAIN_AFTER", 0.05)
    lost: list[bool] = []
    together = asyncio.create_task(run_together(loses_one_cancellation(lost), asyncio.sleep(10)))
    await asyncio.sleep(0.01)
    together.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(together, 5)
    assert lost


async def test_run_together_raises_the_first_failure_and_cancels_the_rest() -> None:
    cancelled = []

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        await asyncio.wait_for(run_together(waits(), fails()), 5)
    assert cancelled
    await asyncio.wait_for(run_together(asyncio.sleep(0), asyncio.sleep(0.01)), 5)  # all end: it returns
