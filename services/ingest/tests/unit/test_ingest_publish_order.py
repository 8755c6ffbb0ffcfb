"""find_overtaken: which stream contents, read from the first sequence whose message failed, hold a change of
ingest's ahead of an earlier one."""

from __future__ import annotations

import pytest

from laredo_ingest.domain.publish_order import find_overtaken

PREDICTED = {5: "m5", 6: "m6", 7: "m7"}  # the sequences ingest named for its messages from the failed one on


@pytest.mark.parametrize(("stored", "overtaken"), [
    ([], None),  # the failed message and all after it refused
    ([(5, "m5")], None),  # its ack was lost, yet it is stored; the rest refused
    ([(5, "m5"), (6, "m6"), (7, "m7")], None),  # all stored after all (acks lost in a reconnect)
    ([(5, "")], None),  # another client's message in its place, nothing of ingest's after it
    ([(5, "other:1"), (6, "other:2")], None),
    ([(5, ""), (6, "m6")], (5, "m5", "", 6, "m6")),  # the hole: its successor stored ahead of it
    ([(5, "m5"), (6, "x"), (7, "m7")], (6, "m6", "x", 7, "m7")),
    ([(5, "m6")], (5, "m5", "m6", 5, "m6")),  # ingest's own message where another of its own belonged
])
def test_a_message_of_ingest_after_one_it_did_not_predict_is_a_disorder(
        stored: list[tuple[int, str]], overtaken: tuple[int, str, str, int, str] | None) -> None:
    found = find_overtaken(PREDICTED, stored)
    assert (None if found is None else (found.sequence, found.expected, found.found, found.later_sequence,
                                        found.later)) == overtaken


def test_the_reason_names_both_messages_and_the_remedy() -> None:
    found = find_overtaken(PREDICTED, [(5, ""), (6, "m6")])
    assert found is not None
    reason = found.reason()
    assert "m5" in reason and "m6" in reason and "without a Nats-Msg-Id" in reason and "new baseline" in reason
