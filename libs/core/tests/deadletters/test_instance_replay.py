"""The replay of a page of dead letters on one instance: whose command it is, each letter's outcome, the answer."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import ChangeBatchInfo, RowChange, TableId
from laredo_core.coordination.ports import CommandStatus
from laredo_core.deadletters.instance_replay import ApplyChanges, answer_replay, replay_page
from laredo_core.deadletters.model import DeadLetter, PipelineId
from laredo_core.deadletters.replay import ReplayOutcome, ReplayReport, replay_args
from laredo_kernel.errors import LaredoError
from laredo_kernel.position import Position
from laredo_core.stream.codec import decode_batch

TABLE = TableId("public", "items")
PIPELINE = PipelineId("pg", TABLE, "replication-fanout")


@dataclass
class Target:
    source_id: str = "pg"
    table: TableId = TABLE
    applied_position: Position | None = None


class Refused(LaredoError):
    pass


def message(*ids: int) -> bytes:
    batch = pb.ChangeBatch(source_id="pg", kind=pb.BATCH_KIND_TRANSACTION, commit_lsn=0x10,
                           table=pb.TableRef(schema="public", name="items"))
    batch.columns.add(name="id", type_oid=23, type_name="int4", is_identity_key=True, primary_key_ordinal=1)
    for ordinal, row_id in enumerate(ids):
        text = str(row_id).encode()
        batch.changes.add(action=pb.ACTION_INSERT, ordinal=ordinal,
                          new_tuple=b"\x00\x01t" + len(text).to_bytes(4, "big") + text)
    return batch.SerializeToString()


def apply_rows(present: set[int]) -> ApplyChanges:
    """Applies inserts of rows not present yet; row 13 is refused."""
    def apply(batch: ChangeBatchInfo, changes: list[RowChange]) -> int:
        applied = 0
        for change in changes:
            row_id = (change.new or {})["id"]
            if row_id == 13:
                raise Refused(f"row {row_id} is refused again")
            if row_id not in present:
                present.add(row_id)
                applied += 1
        return applied
    return apply


def test_each_letter_is_applied_superseded_or_failed_in_order() -> None:
    present = {2}
    letters = [DeadLetter(PIPELINE, "s1-c0", "x", message(1), 0),  # applied
               DeadLetter(PIPELINE, "s2-c0", "x", message(2), 0),  # row there already: superseded
               DeadLetter(PIPELINE, "s3-m", "x", message(3, 2)),  # one of two applied: applied
               DeadLetter(PIPELINE, "s4-c0", "x", message(13), 0),  # refused again
               DeadLetter(PIPELINE, "s5-m", "x", b"\xff")]  # does not decode
    report = replay_page(letters, decode_batch, TABLE, apply_rows(present), not_applicable=(Refused,))
    assert report.outcomes == {"s1-c0": ReplayOutcome.APPLIED, "s2-c0": ReplayOutcome.SUPERSEDED,
                               "s3-m": ReplayOutcome.APPLIED, "s4-c0": ReplayOutcome.FAILED,
                               "s5-m": ReplayOutcome.FAILED}
    assert report.reasons["s4-c0"] == "row 13 is refused again" and "does not decode" in report.reasons["s5-m"]
    assert present == {1, 2, 3}


def test_an_error_the_service_does_not_expect_is_not_swallowed() -> None:
    with pytest.raises(Refused):
        replay_page([DeadLetter(PIPELINE, "s4-c0", "x", message(13), 0)], decode_batch, TABLE, apply_rows(set()))


@pytest.mark.parametrize("pipeline", [PipelineId("pg", TableId("public", "other"), "replication-fanout"),
                                      PipelineId("pg", TABLE, "indexed-memory"),
                                      PipelineId("other-source", TABLE, "replication-fanout")])
def test_a_pipeline_without_a_target_here_is_rejected(pipeline: PipelineId) -> None:
    def replay(on: Target, pipeline: PipelineId, page: list[DeadLetter]) -> ReplayReport:
        raise AssertionError("a pipeline without a target here is not replayed")

    status, text, details = answer_replay(replay_args(pipeline, []), service="fan-out",
                                          target_type="replication-fanout", targets={TABLE: Target()},
                                          replay=replay)
    assert status is CommandStatus.REJECTED and details == {}
    assert text == f"this fan-out instance has no target for pipeline {pipeline}"


def test_the_answer_counts_the_outcomes_of_the_page() -> None:
    target = Target()
    letters = [DeadLetter(PIPELINE, f"s{n}-m", "x", b"") for n in range(3)]
    seen: list[tuple[Target, PipelineId, list[str]]] = []

    def replay(on: Target, pipeline: PipelineId, page: list[DeadLetter]) -> ReplayReport:
        seen.append((on, pipeline, [letter.letter_id for letter in page]))
        return ReplayReport({"s0-m": ReplayOutcome.APPLIED, "s1-m": ReplayOutcome.FAILED,
                             "s2-m": ReplayOutcome.FAILED}, {"s1-m": "a", "s2-m": "b"})

    status, text, details = answer_replay(replay_args(PIPELINE, letters), service="query",
                                          target_type="replication-fanout", targets={TABLE: target}, replay=replay)
    assert seen == [(target, PIPELINE, ["s0-m", "s1-m", "s2-m"])]
    assert status is CommandStatus.SUCCEEDED and text == f"{PIPELINE}: 1 applied, 0 superseded, 2 failed"
    assert details == {"applied": ["s0-m"], "superseded": [], "failed": {"s1-m": "a", "s2-m": "b"}}
    with pytest.raises(ValueError, match="lack the list of letters"):
        answer_replay({"pipeline_id": str(PIPELINE)}, service="query", target_type="replication-fanout",
                      targets={TABLE: target}, replay=replay)

