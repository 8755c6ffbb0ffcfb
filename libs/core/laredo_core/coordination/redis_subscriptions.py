"""Command (stream consumer group) and event (pub/sub) iterators of the Redis coordination store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis.exceptions

from laredo_core.coordination.ports import Command, Event
from laredo_core.coordination.records import command_from_json, event_from_json
from laredo_core.coordination.subscriptions import CommandSubscription, EventSubscription

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub

    from laredo_core.coordination.redis_store import RedisCoordinationStore

logger = logging.getLogger(__name__)

# New and claimed entries are taken one per round: an entry waiting in a local backlog would age toward
# claim_idle unseen and could be claimed by another consumer before this one even yields it.
READ_COUNT = 1
PENDING_COUNT = 100  # entries this consumer name left pending, taken back when it joins
Entry = tuple[str, Mapping[str, str] | None]


def _is_nogroup(error: redis.exceptions.ResponseError) -> bool:
    return str(error).startswith("NOGROUP")


def _id_order(entry_id: str) -> tuple[int, int]:
    millis, _, seq = entry_id.partition("-")
    return int(millis), int(seq or 0)


class RedisCommandSubscription(CommandSubscription):
    """Reads `<prefix>:commands:<target>` as `consumer` of `group`; see redis_store.py for the protocol."""

    def __init__(self, store: RedisCoordinationStore, target: str, consumer: str, group: str | None) -> None:
        super().__init__(target, consumer, group)
        self._store = store
        self._stream = store.key("commands", self.target)
        self._last_id: str | None = None  # highest entry id seen: where a lost group is re-created

    async def _create_group(self) -> None:
        start = "$" if self.from_end else (self._last_id or "0")
        with self._store.unavailable_as(f"joining consumer group {self.group!r} of {self._stream}"):
            try:
                await self._store.client.xgroup_create(self._stream, self.group, id=start, mkstream=True)
            except redis.exceptions.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def _own_pending(self) -> list[Command]:
        return await self._read("0", block_ms=None, count=PENDING_COUNT)

    async def _fetch(self) -> list[Command]:
        claimed = await self._claim_stale()
        if claimed or not self.joined:  # not joined: the group was lost, join again first
            return claimed
        return await self._read(">", block_ms=round(self._store.block * 1000))

    async def _pause_after_failure(self) -> None:
        await asyncio.sleep(self._store.block)

    async def _read(self, start: str, block_ms: int | None, count: int = READ_COUNT) -> list[Command]:
        client = self._store.client
        with self._store.unavailable_as(f"reading commands from {self._stream}"):
            try:
                reply = await client.xreadgroup(self.group, self.consumer, {self._stream: start},
                                                count=count, block=block_ms)
            except redis.exceptions.ResponseError as exc:
                if not _is_nogroup(exc):
                    raise
                self.group_lost()
                return []
        streams = reply.items() if isinstance(reply, dict) else (reply or [])
        entries = [entry for _, stream_entries in streams for entry in stream_entries]
        return await self._commands(entries)

    async def _claim_stale(self) -> list[Command]:
        client, idle_ms = self._store.client, round(self._store.claim_idle * 1000)
        with self._store.unavailable_as(f"claiming stale commands of {self._stream}"):
            try:
                reply = await client.xautoclaim(self._stream, self.group, self.consumer, idle_ms, "0-0",
                                                count=READ_COUNT)
            except redis.exceptions.ResponseError as exc:
                if not _is_nogroup(exc):
                    raise
                self.group_lost()
                return []
            deleted: Sequence[str] = reply[2] if len(reply) > 2 else []
            if deleted:  # trimmed from the stream while pending: nothing left to execute
                await client.xack(self._stream, self.group, *deleted)
        return await self._commands(reply[1])

    async def _commands(self, entries: Iterable[Entry]) -> list[Command]:
        commands, unusable = [], []
        for entry_id, fields in entries:
            if self._last_id is None or _id_order(entry_id) > _id_order(self._last_id):
                self._last_id = entry_id
            command = self._parse(entry_id, fields)
            if command is None:
                unusable.append(entry_id)
                continue
            self._store.track_delivery(command.command_id, (self._stream, self.group, entry_id))
            commands.append(command)
        if unusable:  # acknowledged so they are not redelivered forever
            with self._store.unavailable_as(f"acknowledging unusable entries of {self._stream}"):
                await self._store.client.xack(self._stream, self.group, *unusable)
        return commands

    def _parse(self, entry_id: str, fields: Mapping[str, str] | None) -> Command | None:
        if not fields:
            return None  # deleted from the stream while pending
        try:
            return command_from_json(fields["command"])
        except (KeyError, TypeError, ValueError) as exc:
            logger.error("dropping unusable entry %s of %s (%s: %s): %r; send commands with "
                         "CoordinationStore.send_command", entry_id, self._stream, type(exc).__name__, exc, fields)
            return None


class RedisEventSubscription(EventSubscription):
    """Subscribes to `<prefix>:events` on its own connection; events published while it was away are lost."""

    def __init__(self, store: RedisCoordinationStore) -> None:
        super().__init__()
        self._store = store
        self._channel = store.key("events")
        self._pubsub: PubSub | None = None

    async def _subscribe(self) -> None:
        pubsub = self._store.client.pubsub(ignore_subscribe_messages=True)
        try:
            with self._store.unavailable_as(f"subscribing to {self._channel}"):
                await pubsub.subscribe(self._channel)
        except BaseException:
            await _close_quietly(pubsub)
            raise
        self._pubsub = pubsub

    async def _unsubscribe(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            await _close_quietly(pubsub)

    async def _receive(self) -> Event | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._store.block
        with self._store.unavailable_as(f"receiving events from {self._channel}"):
            while self._pubsub is not None and (remaining := deadline - loop.time()) > 0:
                message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=remaining)
                event = self._parse(message)
                if event is not None:
                    return event
        return None

    async def _pause_after_failure(self) -> None:
        await asyncio.sleep(self._store.block)

    def _parse(self, message: dict[str, Any] | None) -> Event | None:
        if not message or message.get("type") != "message":
            return None
        try:
            return event_from_json(message["data"])
        except (KeyError, TypeError, ValueError) as exc:
            logger.error("ignoring an unusable event on %s (%s: %s): %r; publish events with "
                         "CoordinationStore.publish_event", self._channel, type(exc).__name__, exc, message["data"])
            return None


async def _close_quietly(pubsub: PubSub) -> None:
    with contextlib.suppress(redis.exceptions.RedisError, OSError):
        await pubsub.aclose()
