"""The launcher's health answers for its workers, asked of real health servers on loopback."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import trustme
from aiohttp import web
from laredo_testing.eventually import eventually
from laredo_testing.process import free_port
from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families

from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.health import HealthServer
from laredo_core.metrics import MetricsEndpoint
from laredo_core.runtime import cancel
from laredo_core.worker_health import answers_for_workers, serve_worker_health


async def test_ready_when_every_worker_is_and_metrics_labelled_by_worker() -> None:
    states = [True, False]
    workers = []
    for index in range(2):
        metrics = MetricsEndpoint()
        Counter("laredo_test_reads", "reads", registry=metrics.registry).inc(index + 1)
        workers.append(await HealthServer("127.0.0.1", 0, ready=lambda i=index: (states[i], {"tables": i}),
                                          metrics=metrics).start())
    gone = free_port()  # a third worker that does not answer (restarting)
    stranger = web.Application()  # and on a fourth port something else, answering JSON that is not health's
    async def not_health(_: web.Request) -> web.Response:
        return web.json_response([1])

    stranger.router.add_get("/health/ready", not_health)
    runner = web.AppRunner(stranger)
    await runner.setup()
    other = free_port()
    await web.TCPSite(runner, "127.0.0.1", other).start()
    server, poll = await serve_worker_health("127.0.0.1", 0, [w.port for w in workers] + [gone, other], None)
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as http:
            async def ready() -> tuple[int, dict]:  # type: ignore[type-arg]
                async with http.get(f"{base}/health/ready") as response:
                    return response.status, await response.json()

            await eventually(lambda: _asked(ready), what="the workers asked")
            status, answer = await ready()
            assert status == 503 and [w["ready"] for w in answer["workers"]] == [True, False, False, False]
            assert answer["workers"][1]["tables"] == 1 and "error" in answer["workers"][2]
            assert "HTTP 200 with '[1]'" in answer["workers"][3]["error"]
            async with http.get(f"{base}/metrics") as response:
                text = await response.text()
            reads = {s.labels["worker"]: s.value for f in text_string_to_metric_families(text)
                     for s in f.samples if s.name == "laredo_test_reads_total"}
            assert reads == {"0": 1.0, "1": 2.0}  # the silent worker left out of the scrape
            async with http.get(f"{base}/health/live") as response:
                assert response.status == 200
            states[1] = True
            both, both_poll = await serve_worker_health("127.0.0.1", 0, [w.port for w in workers], None)
            try:
                await eventually(lambda: _status(http, both.port, 200), what="ready once both workers are")
            finally:
                await both.stop()
                await cancel([both_poll])
    finally:
        await server.stop()
        await cancel([poll])
        for worker in workers:
            await worker.stop()
        await runner.cleanup()


async def _status(http: aiohttp.ClientSession, port: int, expected: int) -> bool:
    async with http.get(f"http://127.0.0.1:{port}/health/ready") as response:
        return response.status == expected


async def _asked(ready) -> bool:  # type: ignore[no-untyped-def]
    _, answer = await ready()
    return all("error" not in w or w["error"] != "not asked yet" for w in answer["workers"])


def test_the_launcher_asks_its_workers_unless_their_health_requires_client_certificates() -> None:
    assert answers_for_workers(None) and answers_for_workers(TlsSettings())
    assert answers_for_workers(TlsSettings(cert="c.pem", key="k.pem"))
    assert not answers_for_workers(TlsSettings(cert="c.pem", key="k.pem", client_ca="ca.pem",
                                               require_client_cert=True))


async def test_over_tls_the_launcher_asks_its_workers_and_answers_in_https(tmp_path: Path) -> None:
    authority = trustme.CA()
    issued = authority.issue_cert("localhost", "127.0.0.1")
    cert, key, ca = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(ca))
    tls = TlsSettings(str(cert), str(key))
    worker = await HealthServer("127.0.0.1", 0, ready=lambda: (True, {}), tls=tls).start()
    server, poll = await serve_worker_health("127.0.0.1", 0, [worker.port], tls)
    try:
        trusted = ssl.create_default_context(cafile=str(ca))
        async with aiohttp.ClientSession() as http:
            async def ready() -> bool:
                async with http.get(f"https://127.0.0.1:{server.port}/health/ready", ssl=trusted) as response:
                    return response.status == 200
            await eventually(ready, what="the launcher ready over HTTPS")
    finally:
        await server.stop()
        await cancel([poll])
        await worker.stop()
