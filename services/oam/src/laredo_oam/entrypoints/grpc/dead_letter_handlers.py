"""The dead-letter RPCs of the OAM servicer (a mixin): parse, call one DeadLetters use case, map back."""

from __future__ import annotations

import base64
from typing import Any

import grpc
from laredo.v1 import oam_pb2

from laredo_core.deadletters.model import DeadLetter
from laredo_oam.application.dead_letters import DeadLetters
from laredo_oam.entrypoints.grpc import mappers
from laredo_oam.entrypoints.grpc.errors import mapped_errors, set_up

Context = grpc.aio.ServicerContext


class DeadLetterHandlers:
    """ListDeadLetters, ReplayDeadLetters and PurgeDeadLetters.

    The servicer sets `_dead_letters` (None: the service was built without dead-letter management).
    """

    _dead_letters: DeadLetters | None = None

    def _dead_letter_use_cases(self) -> DeadLetters:
        return set_up(self._dead_letters, "dead-letter management is not set up in this OAM service (see the "
                                          "dead_letters section of the configuration)")

    @mapped_errors
    async def ListDeadLetters(self, request: oam_pb2.ListDeadLettersRequest,
                              context: Context) -> oam_pb2.ListDeadLettersResponse:
        page = await self._dead_letter_use_cases().list(request.pipeline_id, request.limit)
        return oam_pb2.ListDeadLettersResponse(entries=[dead_letter_entry(letter) for letter in page.letters],
                                               total_count=page.total)

    @mapped_errors
    async def ReplayDeadLetters(self, request: oam_pb2.ReplayDeadLettersRequest,
                                context: Context) -> oam_pb2.ReplayDeadLettersResponse:
        totals = await self._dead_letter_use_cases().replay(request.pipeline_id)
        return oam_pb2.ReplayDeadLettersResponse(replayed=totals.replayed, succeeded=totals.succeeded,
                                                 failed=totals.failed)

    @mapped_errors
    async def PurgeDeadLetters(self, request: oam_pb2.PurgeDeadLettersRequest,
                               context: Context) -> oam_pb2.PurgeDeadLettersResponse:
        return oam_pb2.PurgeDeadLettersResponse(purged=await self._dead_letter_use_cases().purge(request.pipeline_id))


def dead_letter_entry(letter: DeadLetter) -> oam_pb2.DeadLetterEntry:
    """change_data: new_values / old_values (as clients see rows), or raw_message_base64 when the message does not
    decode; plus letter_id, stream_sequence, xid, recorded_by and replays (failed replays so far)."""
    data: dict[str, Any] = {"letter_id": letter.letter_id, "stream_sequence": letter.stream_sequence,
                            "xid": letter.xid, "recorded_by": letter.recorded_by, "replays": letter.replays}
    if letter.new_values is not None:
        data["new_values"] = dict(letter.new_values)
    if letter.old_values is not None:
        data["old_values"] = dict(letter.old_values)
    if not letter.decodable:
        data["raw_message_base64"] = base64.b64encode(letter.message).decode("ascii")
    return oam_pb2.DeadLetterEntry(timestamp=mappers.timestamp(letter.recorded_unix_ms),
                                   action=letter.action or "UNDECODABLE", position=letter.position,
                                   error_message=letter.error, change_data=mappers.struct(data))
