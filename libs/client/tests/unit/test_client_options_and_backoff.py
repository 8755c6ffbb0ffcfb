"""Option validation (every problem at once), filters on the wire, and backoff growth, jitter and reset."""

from __future__ import annotations

import random

import pytest

from laredo_client import BackoffPolicy, ClientOptions, Filter, Index
from laredo_client.backoff import Backoff
from laredo_client.replication_loop import filter_to_proto
from laredo_kernel.errors import ConfigError


def test_invalid_options_are_reported_together() -> None:
    with pytest.raises(ConfigError) as caught:
        ClientOptions(address="", schema="public", table="", heartbeat_timeout=0, max_batch_size=-1,
                      indexes=(Index("a", "x"), Index("a", ())), backoff=BackoffPolicy(initial=5, maximum=1))
    text = str(caught.value)
    for expected in ("address: required", "table: required", "heartbeat_timeout", "max_batch_size",
                     "'a' is used twice", "indexes.a: needs one or more", "initial <= maximum"):
        assert expected in text


def test_filters_reject_values_the_server_cannot_compare() -> None:
    with pytest.raises(TypeError, match="filter on 'tags'"):
        Filter.equals("tags", ["a"])
    with pytest.raises(TypeError, match="needs a string"):
        Filter.prefix("name", 3)  # type: ignore[arg-type]


def test_filters_on_the_wire() -> None:
    equals = filter_to_proto(Filter.equals("team", "a"))
    assert equals.field == "team" and equals.equals.string_value == "a"
    assert filter_to_proto(Filter.prefix("name", "n1")).prefix == "n1"
    members = filter_to_proto(Filter.is_in("id", [1, 2**60, None]))
    values = getattr(members, "in").values
    assert [v.WhichOneof("kind") for v in values] == ["number_value", "string_value", "null_value"]
    assert values[1].string_value == str(2**60)  # beyond 2**53, as row values travel
    assert filter_to_proto(Filter.is_in("id", [])).WhichOneof("match") == "in"


def test_backoff_doubles_up_to_the_maximum_with_jitter_and_resets() -> None:
    backoff = Backoff(BackoffPolicy(initial=1, maximum=30, jitter=0.5), random.Random(7))
    delays = [backoff.next_delay() for _ in range(8)]
    ceilings = [1, 2, 4, 8, 16, 30, 30, 30]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True)), delays
    assert len(set(delays)) == len(delays), "jitter spreads the delays"
    backoff.reset()
    assert backoff.attempt == 0 and 0.5 <= backoff.next_delay() <= 1


def test_backoff_without_jitter_is_exact() -> None:
    backoff = Backoff(BackoffPolicy(initial=0.5, maximum=3, jitter=0))
    assert [backoff.next_delay() for _ in range(4)] == [0.5, 1, 2, 3]
