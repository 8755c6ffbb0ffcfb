"""Pipeline ids, letter ids and the replay command's arguments and answers."""

from __future__ import annotations

import pytest

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import Action, TableId
from laredo_core.deadletters.model import DeadLetter, PipelineId, letter_from_dict, letter_to_dict, position_letter_id
from laredo_core.deadletters.replay import (
    ReplayFailed,
    ReplayOutcome,
    ReplayReport,
    changes_to_replay,
    pages,
    parse_replay_args,
    replay_args,
)
from laredo_core.stream.codec import decode_batch

PIPELINE = PipelineId("pg", TableId("public", "items"), "replication-fanout")


@pytest.mark.parametrize("text, expected", [
    ("pg:public.items:replication-fanout", PIPELINE),
    ("pg:my schema.a.b:indexed-memory", PipelineId("pg", TableId("my schema", "a.b"), "indexed-memory")),
])
def test_a_pipeline_id_round_trips(text: str, expected: PipelineId) -> None:
    assert PipelineId.parse(text) == expected and str(expected) == text


@pytest.mark.parametrize("text", ["", "pg", "pg:items:replication-fanout", ":public.items:x", "pg:public.items:"])
def test_a_malformed_pipeline_id_says_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected <source>:<schema>.<table>:<target-type>"):
        PipelineId.parse(text)


def test_position_letter_ids_are_subject_tokens() -> None:
    assert position_letter_id("0/16B3748:b12") == "p0-16B3748-b12"


def test_a_letter_survives_its_json_form() -> None:
    letter = DeadLetter(PIPELINE, "s3-c1", "why", b"\x00\x01", 1, 3, 17, "fanout:a", 2, "INSERT", "0/1:1", 9,
                        None, {"id": 1}, True)
    assert letter_from_dict(letter_to_dict(letter)) == letter


def test_replay_arguments_round_trip_and_refuse_letters_of_other_pipelines() -> None:
    letters = [DeadLetter(PIPELINE, f"s{n}-m", "x", b"y") for n in range(3)]
    assert parse_replay_args(replay_args(PIPELINE, letters)) == (PIPELINE, letters)
    other = PipelineId("pg", TableId("public", "items"), "indexed-memory")
    with pytest.raises(ValueError, match="letters of other pipelines"):
        parse_replay_args(replay_args(other, letters))


def test_pages_bound_letters_and_bytes_in_order() -> None:
    letters = [DeadLetter(PIPELINE, f"s{n}-m", "x", b"y" * 1000) for n in range(7)]
    assert [len(p) for p in pages(letters, max_letters=3)] == [3, 3, 1]
    assert [len(p) for p in pages(letters, max_bytes=3500)] == [2, 2, 2, 1]
    assert [x.letter_id for p in pages(letters) for x in p] == [x.letter_id for x in letters]


def test_a_report_survives_its_command_details() -> None:
    report = ReplayReport({"a": ReplayOutcome.APPLIED, "b": ReplayOutcome.SUPERSEDED, "c": ReplayOutcome.FAILED},
                          {"c": "still broken"})
    assert ReplayReport.from_details(report.to_details()) == report


def test_changes_to_replay_finds_the_change_or_says_why_not() -> None:
    batch = pb.ChangeBatch(source_id="pg", kind=pb.BATCH_KIND_TRANSACTION, commit_lsn=0x10,
                           table=pb.TableRef(schema="public", name="items"))
    batch.columns.add(name="id", type_oid=23, type_name="int4", is_identity_key=True, primary_key_ordinal=1)
    batch.changes.add(action=pb.ACTION_INSERT, ordinal=0, new_tuple=b"\x00\x01t\x00\x00\x00\x011")
    data = batch.SerializeToString()
    _, changes = changes_to_replay(DeadLetter(PIPELINE, "s1-c0", "x", data, 0), decode_batch, PIPELINE.table)
    assert [(c.action, c.new) for c in changes] == [(Action.INSERT, {"id": 1})]
    with pytest.raises(ReplayFailed, match="carries table public.items, not public.other"):
        changes_to_replay(DeadLetter(PIPELINE, "s1-c0", "x", data, 0), decode_batch, TableId("public", "other"))
    with pytest.raises(ReplayFailed, match="none at index 4"):
        changes_to_replay(DeadLetter(PIPELINE, "s1-c4", "x", data, 4), decode_batch, PIPELINE.table)
    with pytest.raises(ReplayFailed, match="still does not decode"):
        changes_to_replay(DeadLetter(PIPELINE, "s1-m", "x", b"\xff"), decode_batch, PIPELINE.table)
