"""Bad input at the front door: each gets a clear protocol error within the configured limits, is logged once
with the peer, and a healthy client on another connection keeps being served meanwhile.

The door here has small limits (LIMITS); OAM is the service behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
import httpx
import pytest
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.frontdoor.envoy_process import ACCESS_LOG_FLUSH_MS
from laredo_testing.eventually import eventually
from laredo_testing.protocols import PROTOCOLS, CallError, Caller

from tests.frontdoor import services
from tests.frontdoor.curl import run_curl
from tests.frontdoor.raw import RawH2, closed_after
from tests.frontdoor.services import Running

pytestmark = pytest.mark.integration

MAX_REQUEST_BYTES = 64 * 1024
IDLE_TIMEOUT, HEADERS_TIMEOUT, MAX_STREAMS = 2.0, 0.5, 4
LIMITS = (f"limits {{ max_request_bytes = {MAX_REQUEST_BYTES}, idle_timeout = {IDLE_TIMEOUT:g}s, "
          f"request_headers_timeout = {HEADERS_TIMEOUT:g}s, max_concurrent_streams = {MAX_STREAMS} }}")
DOOR_LOG = "laredo_core.frontdoor.envoy_process"
LOG_FLUSH = ACCESS_LOG_FLUSH_MS / 1000  # how often the door writes its access log
STATUS = "/laredo.v1.TableSyncOAM/GetTableStatus"
PROTOCOL_ERROR, REFUSED_STREAM = 1, 7
WIRE = {"grpc": ("HTTP/2", "application/grpc"),  # what each protocol's requests say (the door logs it)
        "connect-http1-proto": ("HTTP/1.1", "application/proto"),
        "connect-http1-json": ("HTTP/1.1", "application/json"),
        "connect-http2-proto": ("HTTP/2", "application/proto"),
        "connect-http2-json": ("HTTP/2", "application/json"),
        "grpc-web": ("HTTP/1.1", "application/grpc-web+proto")}


@pytest.fixture(scope="module")
async def door(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    async with services.oam(tmp_path_factory.mktemp("oam-limits"), front_door=LIMITS) as running:
        yield running


@dataclass
class HealthyClient:
    """Calls GetStatus over gRPC on its own connection, back to back, while a test misbehaves elsewhere."""

    address: str
    answered: int = 0
    failures: list[str] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = oam_pb2_grpc.TableSyncOAMStub(channel)
            while not stop.is_set():
                try:
                    await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)
                    self.answered += 1
                except grpc.aio.AioRpcError as exc:
                    self.failures.append(f"{exc.code().name}: {exc.details()}")
                await asyncio.sleep(0.02)


@pytest.fixture
async def healthy(door: Running) -> AsyncIterator[HealthyClient]:
    """The healthy client for the length of a test; it must have been answered throughout."""
    client, stop = HealthyClient(door.address), asyncio.Event()
    task = asyncio.create_task(client.run(stop))
    await eventually(lambda: client.answered > 0, what="the healthy client's first answer")
    yield client
    answered = client.answered
    await eventually(lambda: client.answered > answered, what="the healthy client still answered at the end")
    stop.set()
    await asyncio.wait_for(task, 10)
    assert not client.failures, f"the healthy client was disturbed: {client.failures[:3]}"


class DoorLog(logging.Handler):
    """The front door's log lines of the whole module, and what each test expects to find there.

    Envoy writes its access log every second, so lines are checked once, when the module ends: each
    expected refusal must be there, once, with the peer's address.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.expected: list[tuple[tuple[str, ...], bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def expect(self, *words: str, once: bool = True) -> None:
        """A line with all `words` (exactly one, unless once=False) must be logged by the end of the module."""
        self.expected.append((words, once))

    def matching(self, words: tuple[str, ...]) -> list[str]:
        return [line for line in self.lines if all(w in line for w in words)]

    def problems(self) -> list[str]:
        out = []
        for words, once in self.expected:
            found = self.matching(words)
            if not found or (once and len(found) > 1):
                out.append(f"{len(found)} lines with {words}: {found[:2]}")
            out.extend(f"no peer in {line!r}" for line in found if "from 127.0.0.1:" not in line)
        return out


@pytest.fixture(scope="module")
async def door_log(door: Running) -> AsyncIterator[DoorLog]:
    log, logger = DoorLog(), logging.getLogger(DOOR_LOG)
    logger.addHandler(log)
    try:
        yield log
        await eventually(lambda: all(log.matching(words) for words, _ in log.expected), timeout=LOG_FLUSH + 5,
                         what="every refusal in the front door's log")
    except AssertionError:
        pass  # which one is missing: problems() below says
    finally:
        logger.removeHandler(log)
    await asyncio.sleep(0.5)
    assert not log.problems(), log.problems()


@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if p != "connect-get-json"])
async def test_oversized_request_is_resource_exhausted(door: Running, healthy: HealthyClient, protocol: str,
                                                       door_log: DoorLog) -> None:
    table = f"big_{protocol.replace('-', '_')}_" + "x" * MAX_REQUEST_BYTES
    with pytest.raises(CallError) as caught:
        await Caller(door.address, protocol).unary(STATUS, oam_pb2.GetTableStatusRequest(schema="public",
                                                                                           table=table))
    assert caught.value.code == "RESOURCE_EXHAUSTED", caught.value
    assert str(MAX_REQUEST_BYTES) in caught.value.message or "larger than" in caught.value.message, caught.value
    http, content_type = WIRE[protocol]
    refusal = "grpc-status=8 " if protocol in ("grpc", "grpc-web") else "HTTP 429 "  # Connect's status for it
    door_log.expect(f"POST {STATUS} ", refusal, f"protocol={http} content-type={content_type}")


async def test_oversized_get_is_refused_by_the_door(door: Running, healthy: HealthyClient,
                                                   door_log: DoorLog) -> None:
    """Connect GET carries the message in the URL, which no client library here builds this long: curl does."""
    url = (f"http://{door.address}/laredo.v1.TableSyncOAM/GetTableStatus?connect=v1&encoding=proto&base64=1"
           f"&message={'A' * MAX_REQUEST_BYTES}")
    code, out, err = await run_curl("--output", "/dev/null", "--write-out", "%{http_code}", url)
    assert code == 0, err
    assert out in (b"413", b"414", b"431"), out
    # headers too large to read (431) are logged without the path the door could not read
    door_log.expect(*(["GET /laredo.v1.TableSyncOAM/GetTableStatus"] if out != b"431" else []),
                    f"HTTP {out.decode()} ")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_unknown_method_is_unimplemented(door: Running, healthy: HealthyClient, protocol: str,
                                               door_log: DoorLog) -> None:
    method = f"/laredo.v1.TableSyncOAM/NoSuch{protocol.title().replace('-', '')}"
    caller = Caller(door.address, protocol)
    with pytest.raises(CallError) as caught:
        await caller.unary(method, oam_pb2.GetStatusRequest(), response_type=oam_pb2.GetStatusResponse)
    assert caught.value.code == "UNIMPLEMENTED", caught.value
    with pytest.raises(CallError) as unknown_service:
        await caller.unary("/laredo.v1.NoSuchService/GetStatus", oam_pb2.GetStatusRequest(),
                           response_type=oam_pb2.GetStatusResponse)
    assert unknown_service.value.code == "UNIMPLEMENTED", unknown_service.value
    door_log.expect(f"{method} from")


async def test_broken_grpc_length_prefix_is_an_error_on_its_stream_only(door: Running, healthy: HealthyClient,
                                                                        door_log: DoorLog) -> None:
    """A gRPC frame whose length prefix says 100 bytes, followed by 3 and the end of the stream: INVALID_ARGUMENT
    saying so (grpcio alone leaves such a call unanswered until the client's deadline; see codec._one_request)."""
    async with RawH2.connect(door.address) as raw:
        broken = await raw.request(STATUS, struct.pack(">BI", 0, 100) + b"abc")
        outcome = await raw.finished(broken)
        assert outcome.grpc_status == "3", outcome  # INVALID_ARGUMENT
        assert "length prefix" in urllib.parse.unquote(outcome.headers.get("grpc-message", "")), outcome
        good = oam_pb2.GetTableStatusRequest(schema="public", table="items").SerializeToString()
        fine = await raw.finished(await raw.request(STATUS, struct.pack(">BI", 0, len(good)) + good))
        assert fine.grpc_status == "0", fine  # the same connection still serves
        port = raw.writer.get_extra_info("sockname")[1]
    door_log.expect(f"from 127.0.0.1:{port}")


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
async def test_malformed_json_is_invalid_argument_naming_the_type(door: Running, healthy: HealthyClient,
                                                                   http2: bool,
                                                                   door_log: DoorLog) -> None:
    async with httpx.AsyncClient(http1=not http2, http2=http2) as http:
        response = await http.post(f"http://{door.address}/laredo.v1.LaredoOAMService/GetTableStatus",
                                   content=b'{"schema": "public", "table": ', timeout=10,
                                   headers={"content-type": "application/json", "connect-protocol-version": "1"})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == "invalid_argument", error
    assert "GetTableStatusRequest" in error["message"] or "GetTableStatus" in error["message"], error
    door_log.expect("LaredoOAMService/GetTableStatus", f"protocol={'HTTP/2' if http2 else 'HTTP/1.1'} ")


async def test_wrong_content_type_is_refused_clearly(door: Running, healthy: HealthyClient,
                                                     door_log: DoorLog) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(f"http://{door.address}/laredo.v1.TableSyncOAM/GetStatus", content=b"{}",
                                   headers={"content-type": "text/plain"}, timeout=10)
    if response.status_code != 415:  # or a Connect error that says what is wrong
        assert response.headers.get("content-type", "").startswith("application/json"), response
        assert response.json()["code"] in ("invalid_argument", "unimplemented", "internal"), response.text
    door_log.expect("TableSyncOAM/GetStatus", "text/plain")


async def test_idle_connection_is_closed_after_idle_timeout(door: Running, healthy: HealthyClient,
                                                             door_log: DoorLog) -> None:
    async with RawH2.connect(door.address) as raw:
        done = await raw.request(STATUS, struct.pack(">BI", 0, 0))
        assert (await raw.finished(done)).headers, "no answer to a well-formed call"
        started = asyncio.get_running_loop().time()
        await raw.wait_for(lambda: raw.closed_by_server, IDLE_TIMEOUT * 4)
        assert asyncio.get_running_loop().time() - started >= IDLE_TIMEOUT * 0.8
    silent, port = await closed_after(door.address, b"", IDLE_TIMEOUT * 4)  # connects, never says a word
    assert IDLE_TIMEOUT * 0.8 <= silent, silent
    door_log.expect(f"connection from 127.0.0.1:{port} sent nothing in", f"limits.idle_timeout {IDLE_TIMEOUT:g}s")


async def test_half_sent_headers_are_dropped_after_request_headers_timeout(door: Running,
                                                                           healthy: HealthyClient,
                                                                           door_log: DoorLog) -> None:
    elapsed, port = await closed_after(door.address,
                                       b"POST /laredo.v1.TableSyncOAM/GetStatus HTTP/1.1\r\nHost: a\r\n",
                                       IDLE_TIMEOUT * 4)
    assert elapsed < IDLE_TIMEOUT, f"closed after {elapsed:.2f}s, not by request_headers_timeout ({HEADERS_TIMEOUT}s)"
    door_log.expect(f"from 127.0.0.1:{port}: HTTP 408 ")


async def test_too_many_streams_on_one_connection(door: Running, healthy: HealthyClient,
                                                  door_log: DoorLog) -> None:
    """A client past SETTINGS_MAX_CONCURRENT_STREAMS breaks HTTP/2. RFC 9113 asks for a stream error; Envoy's
    codecs make it a connection error, closed without a GOAWAY. What holds either way: the extra call is not
    served, that client's connection alone ends, the healthy client on its own connection is not hurt, and the
    door logs it once, with the peer and in plain words."""
    watch = "/laredo.v1.TableSyncOAM/WatchStatus"
    async with RawH2.connect(door.address) as raw:
        assert raw.server_max_streams == MAX_STREAMS
        open_streams = [await raw.request(watch, struct.pack(">BI", 0, 0)) for _ in range(MAX_STREAMS)]
        await raw.wait_for(lambda: all(raw.streams[s].headers for s in open_streams), 10)
        extra = await raw.request_past_the_limit(watch, struct.pack(">BI", 0, 0))
        outcome = await raw.finished(extra)
        port = raw.writer.get_extra_info("sockname")[1]
        assert not outcome.headers, f"the call past the limit was served: {outcome}"
        if outcome.reset is not None:  # what the RFC asks for
            assert outcome.reset in (REFUSED_STREAM, PROTOCOL_ERROR), outcome
            assert not raw.closed_by_server, "the connection was closed for one stream too many"
        else:
            assert raw.closed_by_server, outcome
    door_log.expect(f"from 127.0.0.1:{port}", f"more than {MAX_STREAMS} calls at once")

