"""The DeadLetterStore contract, run against the in-memory fake and JetStream (a real nats-server)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import TableId
from laredo_core.deadletters.memory_store import InMemoryDeadLetterStore
from laredo_core.deadletters.model import (
    WHOLE_MESSAGE,
    DeadLetter,
    DeadLetterStoreUnavailable,
    PipelineId,
    change_letter_id,
    message_letter_id,
)
from laredo_core.deadletters.nats_store import NatsDeadLetterStore
from laredo_core.deadletters.records import UNCHANGED_SHOWN
from laredo_core.deadletters.store import DeadLetterStore
from laredo_kernel.tuples import UNCHANGED, encode_tuple

FANOUT = PipelineId("pg", TableId("public", "items"), "replication-fanout")
QUERY = PipelineId("pg", TableId("public", "items"), "indexed-memory")
ODD = PipelineId("pg", TableId("my schema", "a.b"), "indexed-memory")


def batch_bytes(*values: tuple[int, str]) -> bytes:
    """A TRANSACTION message of public.items (id int4 key, name text) inserting each (id, name)."""
    batch = pb.ChangeBatch(source_id="pg", kind=pb.BATCH_KIND_TRANSACTION, table=pb.TableRef(schema="public",
                           name="items"), commit_lsn=0x16B3748, xid=777)
    batch.columns.extend([pb.Column(name="id", type_oid=23, type_name="int4", is_identity_key=True,
                                    primary_key_ordinal=1),
                          pb.Column(name="name", type_oid=25, type_name="text")])
    for ordinal, (key, name) in enumerate(values):
        batch.changes.add(action=pb.ACTION_INSERT, ordinal=ordinal,
                          new_tuple=encode_tuple([str(key).encode(), UNCHANGED if name == "~" else name.encode()]))
    return batch.SerializeToString()


def letter(pipeline: PipelineId, letter_id: str, error: str = "boom", **fields: object) -> DeadLetter:
    return DeadLetter(pipeline, letter_id, error, recorded_unix_ms=1_700_000_000_000, recorded_by="fanout:a",
                      **fields)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", pytest.param("jetstream", marks=pytest.mark.integration)])
async def store(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[DeadLetterStore]:
    if request.param == "memory":
        yield InMemoryDeadLetterStore()
        return
    nats_url = request.getfixturevalue("nats_url")
    jetstream = NatsDeadLetterStore([nats_url], unique_name, timeout=5.0)
    yield jetstream
    await jetstream.close()


async def test_a_store_without_letters_lists_nothing(store: DeadLetterStore) -> None:
    page = await store.list(FANOUT)
    assert (page.letters, page.total) == ((), 0)
    assert await store.count(FANOUT) == 0
    assert await store.purge(FANOUT) == 0


async def test_a_failed_change_is_stored_narrowed_to_that_change_and_described(store: DeadLetterStore) -> None:
    message = batch_bytes((1, "one"), (2, "two"), (3, "~"))
    await store.write(letter(FANOUT, change_letter_id(41, 1), "row lacks key", message=message, change_index=1,
                             stream_sequence=41))
    await store.write(letter(FANOUT, change_letter_id(41, 2), "other", message=message, change_index=2,
                             stream_sequence=41))
    page = await store.list(FANOUT)
    assert page.total == 2 and [x.letter_id for x in page.letters] == ["s41-c1", "s41-c2"]
    first = page.letters[0]
    assert (first.action, first.position, first.xid, first.error) == ("INSERT", "0/016B3748:1", 777, "row lacks key")
    assert first.new_values == {"id": 2, "name": "two"} and first.old_values is None and first.decodable
    assert (first.change_index, first.stream_sequence, first.recorded_by) == (0, 41, "fanout:a")
    assert len(pb.ChangeBatch.FromString(first.message).changes) == 1, "only the failed change is kept"
    assert page.letters[1].new_values == {"id": 3, "name": UNCHANGED_SHOWN}
    assert first.store_sequence < page.letters[1].store_sequence <= page.newest_sequence


async def test_undecodable_bytes_are_kept_as_they_are(store: DeadLetterStore) -> None:
    await store.write(letter(FANOUT, message_letter_id(9), "corrupt change batch", message=b"\xff\x00garbage",
                             stream_sequence=9))
    (stored,) = (await store.list(FANOUT)).letters
    assert (stored.message, stored.change_index, stored.decodable, stored.action) == (
        b"\xff\x00garbage", WHOLE_MESSAGE, False, "")


async def test_writing_a_letter_again_replaces_it_and_moves_it_last(store: DeadLetterStore) -> None:
    for n in range(3):
        await store.write(letter(FANOUT, f"s{n}-m", message=b"x"))
    await store.write(letter(FANOUT, "s0-m", message=b"x"))  # another instance, same failure: stored once
    await store.write(letter(FANOUT, "s0-m", "still failing", message=b"x", replays=1))
    page = await store.list(FANOUT)
    assert [x.letter_id for x in page.letters] == ["s1-m", "s2-m", "s0-m"] and page.total == 3
    assert (page.letters[-1].error, page.letters[-1].replays) == ("still failing", 1)


async def test_limit_and_after_sequence_page_through_a_pipeline(store: DeadLetterStore) -> None:
    for n in range(5):
        await store.write(letter(FANOUT, f"s{n}-m", message=b"x"))
        await store.write(letter(QUERY, f"s{n}-m", message=b"x"))
    first = await store.list(FANOUT, limit=2)
    assert [x.letter_id for x in first.letters] == ["s0-m", "s1-m"] and first.total == 5
    rest = await store.list(FANOUT, after_sequence=first.letters[-1].store_sequence)
    assert [x.letter_id for x in rest.letters] == ["s2-m", "s3-m", "s4-m"] and rest.total == 5


async def test_remove_and_purge_touch_one_pipeline_only(store: DeadLetterStore) -> None:
    for n in range(4):
        await store.write(letter(FANOUT, f"s{n}-m", message=b"x"))
        await store.write(letter(ODD, f"s{n}-m", message=b"x"))
    assert await store.remove(FANOUT, ["s1-m", "s3-m", "s9-m", "s1-m"]) == 2
    assert [x.letter_id for x in (await store.list(FANOUT)).letters] == ["s0-m", "s2-m"]
    assert await store.count(ODD) == 4
    assert await store.purge(FANOUT) == 2
    assert await store.count(FANOUT) == 0 and await store.count(ODD) == 4
    assert [x.letter_id for x in (await store.list(ODD)).letters] == ["s0-m", "s1-m", "s2-m", "s3-m"]


async def test_an_unreachable_store_raises_unavailable(unique_name: str) -> None:
    memory = InMemoryDeadLetterStore(available=False)
    with pytest.raises(DeadLetterStoreUnavailable):
        await memory.count(FANOUT)
    unreachable = NatsDeadLetterStore(["nats://127.0.0.1:1"], unique_name, timeout=0.5)
    with pytest.raises(DeadLetterStoreUnavailable, match="did not answer"):
        await unreachable.write(letter(FANOUT, "s1-m", message=b"x"))
    await unreachable.close()
