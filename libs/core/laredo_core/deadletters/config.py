"""The `dead_letters { ... }` section: shared by fan-out and query (which write letters), ingest (which writes
the letters of tables without a usable key) and OAM (which lists, replays and purges them)."""

from __future__ import annotations

from dataclasses import dataclass

from laredo_core.config import LaredoSettings
from laredo_core.config.reader import Reader

DEFAULT_WRITE_QUEUE = 10_000
DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class DeadLetterSettings:
    enabled: bool = True
    nats_urls: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    subject_prefix: str = "laredo"
    replicas: int = 1
    max_age: float = 0.0  # 0: kept until replayed or purged
    max_bytes: int = -1  # -1: unlimited
    duplicate_window: float = 120.0
    write_queue: int = DEFAULT_WRITE_QUEUE
    timeout: float = DEFAULT_TIMEOUT


def read_dead_letter_settings(settings: LaredoSettings) -> DeadLetterSettings:
    """The section with every value checked; ConfigError lists all problems, each with its key."""
    r = Reader(settings.dead_letters, "dead_letters")
    stream = settings.stream
    config = DeadLetterSettings(
        enabled=r.boolean("enabled", True),
        nats_urls=stream.nats_urls,
        subject_prefix=stream.subject_prefix,
        replicas=r.integer("replicas", stream.replicas, minimum=1, maximum=5),
        max_age=r.duration("max_age", 0.0),
        max_bytes=r.integer("max_bytes", -1, minimum=-1),
        duplicate_window=stream.duplicate_window,
        write_queue=r.integer("write_queue", DEFAULT_WRITE_QUEUE, minimum=1),
        timeout=r.duration("timeout", DEFAULT_TIMEOUT),
    )
    if config.timeout <= 0:
        r.problem("timeout", f"must be a positive duration such as 5s, got {config.timeout:g}s")
    if config.max_age < 0:
        r.problem("max_age", f"must be 0 (keep until replayed or purged) or positive, got {config.max_age:g}s")
    r.check_unknown()
    r.raise_if_problems()
    return config
