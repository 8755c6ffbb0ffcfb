"""CoordinationStore on Redis (redis.asyncio): instance registry, leases, command streams, results, events.

Key layout, everything under `<p>:` (`redis.key_prefix`, default `laredo`):

    <p>:instance:<service>:<instance_id>  string, PX ttl       InstanceStatus JSON; expiry = instance gone
    <p>:instances                         sorted set          members `<service>:<instance_id>`, score = last
                                                              heartbeat (unix ms); an index, not the truth
    <p>:lease:<name>                      string, PX ttl      the holder; SET NX PX, Lua compare-and-renew
                                                              and compare-and-delete
    <p>:commands:<target>                 stream, MAXLEN ~N   field `command` = Command JSON; consumer group
                                                              `<target>`, or one group per broadcast reader
    <p>:result:<command_id>               string, PX 1 h      CommandResult JSON, first completion wins (SET NX)
    <p>:result-ready:<command_id>         list, PX 1 h        a token per completion; waiters BLPOP it
    <p>:events                            pub/sub channel     Event JSON

Registry index: a sorted set instead of SCAN because SCAN walks the whole keyspace (streams, results, other
prefixes) in several round trips, while the index is one round trip over live instances only. The key TTL
stays the only truth about liveness: the listing script reads each member's key and removes members whose
key expired, so clocks of different hosts never decide who is alive.

Commands: XADD; a reader XGROUP CREATEs its group (MKSTREAM; the target's own group at 0, a caller-named one at
`$`), first takes back what its consumer name left pending (XREADGROUP 0), then per round XAUTOCLAIMs entries
idle longer than `claim_idle` before XREADGROUP > BLOCK `block`. `complete_command` stores the result, wakes
waiters and XACKs in one MULTI; it acknowledges a delivery this store object made (the oldest one of that
command id): complete a command through the store that delivered it, or it is delivered again after
`claim_idle`.

Outage: sockets time out after `socket_timeout` s (connect: `connect_timeout` s) and redis-py's own retries
are off, so every method raises CoordinationUnavailable within about two seconds; the command and event
iterators never raise it but wait and carry on, re-creating a consumer group the server lost (a restart
without persistence). Scripts use keys they are not passed, so this adapter needs a non-cluster Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from laredo_core.coordination.ports import (Command, CommandKind, CommandResult, CoordinationUnavailable, Event,
                                            InstanceStatus)
from laredo_core.coordination.records import (check_name, command_to_json, event_to_json, finished_result,
                                              instance_from_json, instance_to_json, new_command, now_unix_ms,
                                              positive_seconds, result_from_json, result_to_json)
from laredo_core.coordination.redis_subscriptions import RedisCommandSubscription, RedisEventSubscription
from laredo_core.redaction import redact_url

__all__ = ["RedisCoordinationStore"]

# Errors that say "this Redis cannot serve us now", whatever the cause (down, loading, replica, out of memory,
# unwritable disk, missing permission): callers retry later, data keeps flowing. Anything else is a bug.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,  # also BusyLoadingError, AuthenticationError, MaxConnectionsError
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.NoPermissionError,
    OSError,
)
UNAVAILABLE_REPLIES = ("MISCONF", "BUSY ", "NOAUTH")

_LIST_INSTANCES = """
local found = {}
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local value = redis.call('GET', ARGV[1] .. member)
  if value then table.insert(found, value) else redis.call('ZREM', KEYS[1], member) end
end
return found
"""
_RENEW_IF_HOLDER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_DELETE_IF_HOLDER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

DeliveryKey = tuple[str, str, str]  # stream key, group, entry id
_TLS_HINT = (", that redis.tls.ca names the CA that signs its certificate and that redis.tls.cert and key are set "
             "if it requires client certificates")


class RedisCoordinationStore:
    """CoordinationStore on one Redis server; see the module docstring for keys, delivery and outages.

    Nothing connects in the constructor; call `aclose()` when done. Tuning: `claim_idle` (seconds before an
    unacknowledged command goes to another consumer), `block` (longest single wait of a blocking read; must
    be below `socket_timeout`), `result_ttl`, `stream_maxlen` (approximate cap per command stream).
    """

    def __init__(self, url: str, key_prefix: str = "laredo", *, claim_idle: float = 30.0, block: float = 1.0,
                 result_ttl: float = 3600.0, stream_maxlen: int = 10_000, socket_timeout: float = 2.0,
                 connect_timeout: float = 1.0) -> None:
        if not 0 < block < socket_timeout:
            raise ValueError(f"block ({block}s) must be positive and below socket_timeout ({socket_timeout}s), "
                             "or every blocking read would time out")
        self.safe_url = redact_url(url.partition("?")[0])  # without redis.tls's file names
        self._tls_hint = _TLS_HINT if url.startswith("rediss://") else ""
        self.key_prefix = check_name("Redis key prefix", key_prefix)
        self.claim_idle = claim_idle
        self.block = block
        self.result_ttl = result_ttl
        self.stream_maxlen = stream_maxlen
        self.client: redis.asyncio.Redis = redis.asyncio.Redis.from_url(
            url, decode_responses=True, socket_timeout=socket_timeout, socket_connect_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 0))
        self._list_instances = self.client.register_script(_LIST_INSTANCES)
        self._renew_if_holder = self.client.register_script(_RENEW_IF_HOLDER)
        self._delete_if_holder = self.client.register_script(_DELETE_IF_HOLDER)
        self._deliveries: dict[str, dict[DeliveryKey, None]] = {}

    async def aclose(self) -> None:
        with contextlib.suppress(*TRANSIENT_ERRORS):
            await self.client.aclose()

    def key(self, *parts: str) -> str:
        return ":".join((self.key_prefix, *parts))

    @contextlib.contextmanager
    def unavailable_as(self, doing: str) -> Iterator[None]:
        """Turn Redis' transient errors raised inside into CoordinationUnavailable naming `doing`."""
        try:
            yield
        except (redis.exceptions.RedisError, OSError) as exc:
            if not _means_unavailable(exc):
                raise
            raise CoordinationUnavailable(
                f"Redis at {self.safe_url} is unavailable while {doing} ({type(exc).__name__}: {exc}); check that "
                f"Redis is running and that redis.url points to it{self._tls_hint}. Data keeps flowing; "
                "coordination resumes when Redis answers again"
            ) from exc

    # Registry

    async def heartbeat(self, instance: InstanceStatus, ttl: float) -> None:
        member = f"{check_name('service', instance.service)}:{check_name('instance id', instance.instance_id)}"
        stamped = replace(instance, heartbeat_unix_ms=instance.heartbeat_unix_ms or now_unix_ms())
        text = instance_to_json(stamped)
        with self.unavailable_as(f"storing the heartbeat of {member}"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(self.key("instance", member), text, px=_millis("ttl", ttl))
                pipe.zadd(self.key("instances"), {member: stamped.heartbeat_unix_ms})
                await pipe.execute()

    async def deregister(self, service: str, instance_id: str) -> None:
        member = f"{service}:{instance_id}"
        with self.unavailable_as(f"deregistering {member}"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.key("instance", member))
                pipe.zrem(self.key("instances"), member)
                await pipe.execute()

    async def instances(self, service: str | None = None) -> list[InstanceStatus]:
        with self.unavailable_as("listing instances"):
            texts = await self._list_instances(keys=[self.key("instances")], args=[self.key("instance", "")])
        found = [instance_from_json(text) for text in texts]
        return sorted((i for i in found if service is None or i.service == service),
                      key=lambda i: (i.service, i.instance_id))

    # Leases

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> bool:
        key, millis = self.key("lease", check_name("lease name", name)), _millis("ttl", ttl)
        with self.unavailable_as(f"acquiring lease {name!r}"):
            if await self.client.set(key, check_name("lease holder", holder), nx=True, px=millis):
                return True
            return bool(await self._renew_if_holder(keys=[key], args=[holder, millis]))

    async def renew_lease(self, name: str, holder: str, ttl: float) -> bool:
        with self.unavailable_as(f"renewing lease {name!r}"):
            return bool(await self._renew_if_holder(keys=[self.key("lease", name)],
                                                    args=[holder, _millis("ttl", ttl)]))

    async def release_lease(self, name: str, holder: str) -> None:
        with self.unavailable_as(f"releasing lease {name!r}"):
            await self._delete_if_holder(keys=[self.key("lease", name)], args=[holder])

    async def lease_holder(self, name: str) -> str | None:
        with self.unavailable_as(f"reading the holder of lease {name!r}"):
            holder: str | None = await self.client.get(self.key("lease", name))
        return holder

    # Commands

    async def send_command(self, target: str, kind: CommandKind, args: Mapping[str, Any] | None = None) -> str:
        command = new_command(target, kind, args, now_unix_ms())
        text = command_to_json(command)
        with self.unavailable_as(f"sending {kind.value} to {target!r}"):
            await self.client.xadd(self.key("commands", target), {"command": text},
                                   maxlen=self.stream_maxlen, approximate=True)
        return command.command_id

    def commands(self, target: str, consumer: str, *, group: str | None = None) -> RedisCommandSubscription:
        return RedisCommandSubscription(self, target, consumer, group)

    async def complete_command(self, command: Command, result: CommandResult) -> None:
        text = result_to_json(finished_result(command, result, now_unix_ms()))
        ready_key, millis = self.key("result-ready", command.command_id), _millis("result_ttl", self.result_ttl)
        delivery = next(iter(self._deliveries.get(command.command_id, {})), None)
        with self.unavailable_as(f"completing command {command.command_id}"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(self.key("result", command.command_id), text, nx=True, px=millis)
                pipe.rpush(ready_key, "1")
                pipe.pexpire(ready_key, millis)
                if delivery is not None:
                    pipe.xack(*delivery)
                replies = await pipe.execute(raise_on_error=False)
        if delivery is not None:
            self._forget_delivery(command.command_id, delivery)
        for reply in replies:
            # NOGROUP from XACK: the server lost the group since delivery (restart); nothing left to ack.
            if isinstance(reply, Exception) and not str(reply).startswith("NOGROUP"):
                raise reply

    async def command_result(self, command_id: str, timeout: float) -> CommandResult | None:
        """Wait for the result; the BLPOP token wakes one waiter at once, others see it within `block` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        result_key, ready_key = self.key("result", command_id), self.key("result-ready", command_id)
        with self.unavailable_as(f"waiting for the result of command {command_id}"):
            while (text := await self.client.get(result_key)) is None:
                remaining = deadline - loop.time()
                if remaining < 0.01:
                    return None
                await self.client.blpop([ready_key], timeout=round(min(remaining, self.block), 3))
        return result_from_json(text)

    def track_delivery(self, command_id: str, delivery: DeliveryKey) -> None:
        """Remember where a command came from, so `complete_command` can acknowledge that entry."""
        self._deliveries.setdefault(command_id, {})[delivery] = None

    def _forget_delivery(self, command_id: str, delivery: DeliveryKey) -> None:
        deliveries = self._deliveries.get(command_id, {})
        deliveries.pop(delivery, None)
        if not deliveries:
            self._deliveries.pop(command_id, None)

    # Events

    async def publish_event(self, event: Event) -> None:
        text = event_to_json(replace(event, unix_ms=event.unix_ms or now_unix_ms()))
        with self.unavailable_as(f"publishing event {event.kind!r}"):
            await self.client.publish(self.key("events"), text)

    def events(self) -> RedisEventSubscription:
        return RedisEventSubscription(self)


def _means_unavailable(error: BaseException) -> bool:
    return isinstance(error, TRANSIENT_ERRORS) or (
        isinstance(error, redis.exceptions.ResponseError) and str(error).startswith(UNAVAILABLE_REPLIES))


def _millis(what: str, seconds: float) -> int:
    return max(1, round(positive_seconds(what, seconds) * 1000))
