"""The front door's log: which of Envoy's lines an operator sees, and in what words."""

from __future__ import annotations

from laredo_core.frontdoor.door_log import BROKEN_HTTP2, DoorLog
from laredo_core.frontdoor.settings import FrontDoorSettings

SETTINGS = FrontDoorSettings(idle_timeout=2.0, max_concurrent_streams=4)


def end(peer: str, ms: int, received: int, tls: str = "-", protocol: str = "HTTP/2") -> str:
    return (f"connection from {peer} closed after {ms} ms: received {received} bytes, protocol={protocol} "
            f"tls-failure={tls}")


def test_a_refused_call_passes_as_it_is() -> None:
    line = "front door refused POST /x from 127.0.0.1:5: HTTP 415 direct_response"
    assert DoorLog(SETTINGS)(line) == line


def test_a_connection_that_said_nothing_until_the_idle_timeout_is_named() -> None:
    said = DoorLog(SETTINGS)(end("127.0.0.1:7", 2001, 0, protocol="-"))
    assert said == "connection from 127.0.0.1:7 sent nothing in 2.0s and was closed (limits.idle_timeout 2s)"


def test_connections_that_made_calls_or_left_at_once_are_not_news() -> None:
    log = DoorLog(SETTINGS)
    assert log(end("127.0.0.1:7", 8000, 4096)) is None  # calls, then idle: an ordinary client
    assert log(end("127.0.0.1:8", 3, 0, protocol="-")) is None  # a TCP probe


def test_a_failed_tls_handshake_is_named_with_its_reason() -> None:
    said = DoorLog(SETTINGS)(end("127.0.0.1:9", 4, 300, tls="TLS_error:|268435645:SSL routines:OPENSSL_internal:"
                                                            "PEER_DID_NOT_RETURN_A_CERTIFICATE:TLS_error_end"))
    assert said is not None and said.startswith("TLS handshake with 127.0.0.1:9 failed: ")
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in said


def test_a_connection_broken_by_its_client_is_one_line_in_plain_words() -> None:
    log = DoorLog(SETTINGS)
    calls = [f"front door refused POST /w from 127.0.0.1:{port}: HTTP 200 {BROKEN_HTTP2} flags=DPE"
             for port in (11, 11, 11, 12)]
    said = [log(line) for line in calls]
    assert said[1] is None and said[2] is None  # the other calls of that connection
    assert said[0] is not None and "more than 4 calls at once" in said[0] and "127.0.0.1:11" in said[0]
    assert said[3] is not None and "127.0.0.1:12" in said[3]
