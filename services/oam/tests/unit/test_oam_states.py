"""Pure state rules: pipeline state from ingest + target reports, service state, pipeline ids."""

from __future__ import annotations

import pytest
from laredo_kernel.changes import TableId

from laredo_oam.domain.catalog import PipelineKey, table_from_request
from laredo_oam.domain.errors import InvalidRequest
from laredo_oam.domain.states import PipelineState, ServiceState, pipeline_state, service_state

STREAMED = {"baseline_complete": True}


@pytest.mark.parametrize(("ingest", "target", "expected"), [
    (None, STREAMED, PipelineState.STOPPED),
    ({"phase": "failed"}, STREAMED, PipelineState.ERROR),
    ({"phase": "paused", "baseline_complete": True}, STREAMED, PipelineState.PAUSED),
    ({"phase": "baseline"}, None, PipelineState.BASELINING),
    ({"phase": "rebaseline", "baseline_complete": True}, STREAMED, PipelineState.BASELINING),
    ({"phase": "standby"}, None, PipelineState.INITIALIZING),
    ({"phase": "streaming", "baseline_complete": False}, STREAMED, PipelineState.BASELINING),
    ({"phase": "streaming", "baseline_complete": True}, None, PipelineState.INITIALIZING),
    ({"phase": "streaming", "baseline_complete": True}, {"baseline_complete": False}, PipelineState.BASELINING),
    ({"phase": "streaming", "baseline_complete": True}, STREAMED, PipelineState.STREAMING),
])
def test_pipeline_state(ingest: dict | None, target: dict | None, expected: PipelineState) -> None:
    assert pipeline_state(ingest, target) is expected


@pytest.mark.parametrize(("phases", "pipelines", "expected"), [
    ([], [], ServiceState.STARTING),
    (["streaming"], [PipelineState.STREAMING, PipelineState.STREAMING], ServiceState.STREAMING),
    (["streaming"], [PipelineState.STREAMING, PipelineState.BASELINING], ServiceState.BASELINING),
    (["paused"], [PipelineState.PAUSED], ServiceState.PAUSED),
    (["rebaseline"], [PipelineState.BASELINING], ServiceState.RELOADING),
    (["failed", "paused"], [PipelineState.ERROR, PipelineState.PAUSED], ServiceState.ERROR),
    (["streaming"], [PipelineState.INITIALIZING], ServiceState.STARTING),
])
def test_service_state(phases: list[str], pipelines: list[PipelineState], expected: ServiceState) -> None:
    assert service_state(phases, pipelines) is expected


def test_pipeline_id_round_trips() -> None:
    key = PipelineKey("pg", TableId("public", "users"), "replication-fanout")
    assert key.pipeline_id == "pg:public.users:replication-fanout"
    assert PipelineKey.parse(key.pipeline_id) == key


@pytest.mark.parametrize("malformed", ["pg", "pg:users:replication-fanout", ":public.users:x", "pg:public.users:"])
def test_malformed_pipeline_id_is_invalid(malformed: str) -> None:
    with pytest.raises(InvalidRequest, match="<source>:<schema>.<table>:<target-type>"):
        PipelineKey.parse(malformed)


def test_table_from_request_defaults_schema_and_needs_a_table() -> None:
    assert table_from_request("", "users") == TableId("public", "users")
    assert table_from_request("", "sales.orders") == TableId("sales", "orders")
    with pytest.raises(InvalidRequest, match="table is required"):
        table_from_request("public", "")
