"""Subscriber buffers: bounded, never blocking the applier; drops are counted, or the stream ends."""

from __future__ import annotations

import asyncio

import pytest

from laredo_kernel.changes import Action
from laredo_kernel.position import Position
from laredo_query.application.subscriptions import OverflowPolicy, SubscriberHub
from laredo_query.domain.errors import ServiceStopping, SubscriberOverflowed
from laredo_query.domain.events import ChangeEvent


def event(n: int) -> ChangeEvent:
    return ChangeEvent(Action.INSERT, Position(1, n), 0, 0, None, None)


async def test_a_full_buffer_drops_new_events_and_counts_them() -> None:
    hub = SubscriberHub("public.items", capacity=256)
    slow, fast = hub.open(), hub.open()
    hub.publish([event(n) for n in range(300)])  # returns at once: nobody is waiting for the slow reader
    assert (len(slow), slow.dropped) == (256, 44)
    assert [(await slow.next()).position.ordinal for _ in range(3)] == [0, 1, 2]
    hub.publish([event(300)])
    assert slow.dropped == 44 and len(slow) == 254
    assert fast.dropped == 45 and hub.dropped == 89
    hub.close(slow)
    hub.close(fast)
    assert len(hub) == 0 and hub.dropped == 89, "drops of closed subscribers stay counted"


async def test_next_waits_for_an_event_without_polling() -> None:
    hub = SubscriberHub("public.items")
    subscription = hub.open()
    waiter = asyncio.create_task(subscription.next())
    await asyncio.sleep(0)
    assert not waiter.done()
    hub.publish([event(7)])
    assert (await asyncio.wait_for(waiter, 1)).position.ordinal == 7
    assert subscription.delivered == 1


async def test_the_close_policy_ends_an_overflowing_subscriber() -> None:
    hub = SubscriberHub("public.items", capacity=2, policy=OverflowPolicy.CLOSE)
    subscription = hub.open()
    hub.publish([event(1), event(2), event(3)])
    with pytest.raises(SubscriberOverflowed, match="2-event buffer overflowed; subscribe again"):
        await subscription.next()
    assert subscription.ended and subscription.dropped == 0


async def test_end_all_wakes_waiting_subscribers_with_the_reason() -> None:
    hub = SubscriberHub("public.items")
    subscription = hub.open()
    waiter = asyncio.create_task(subscription.next())
    await asyncio.sleep(0)
    hub.end_all(ServiceStopping("stopping"))
    with pytest.raises(ServiceStopping):
        await asyncio.wait_for(waiter, 1)
    hub.publish([event(1)])
    assert len(subscription) == 0, "an ended subscription takes no more events"
