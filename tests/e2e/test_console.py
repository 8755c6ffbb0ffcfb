"""OAM's web console in a real browser (Debian's headless chromium, driven by Playwright) against a running
system with bearer tokens: the page loads from the OAM address, shows the pipeline STREAMING and its row count
growing after inserts; a read token gets no admin action and is refused the drain; with the admin token the
source is paused (the pipeline shows PAUSED) and resumed (it becomes STREAMING again), and one of two fan-out
instances is drained and shown draining. Screenshots are kept in tests/artifacts/console/.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from laredo_kernel.changes import TableId
from laredo_testing.eventually import eventually

from tests.e2e.harness import ServiceProcess, create_table, free_port, serving
from tests.e2e.system import System, SystemConfig, running_system

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ADMIN_TOKEN, READ_TOKEN = "console-admin-token-0001", "console-read-token-00001"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SECOND_FANOUT = "fanout-b"


@pytest.fixture
def system(pg_dsn: str, nats_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 100)
    for name, secret in (("admin", ADMIN_TOKEN), ("read", READ_TOKEN)):
        (tmp_path / f"{name}.token").write_text(secret + "\n")
    tokens = f"""auth {{ tokens = [
  {{ name = operator, role = admin, file = "{tmp_path}/admin.token" }}
  {{ name = viewer, role = read, file = "{tmp_path}/read.token" }}
] }}"""
    with running_system(pg_dsn, nats_url, unique_name, table, tmp_path,
                        config=SystemConfig(sections=tokens)) as running:
        yield running


@pytest.fixture
def second_fanout(system: System, tmp_path: Path) -> Iterator[ServiceProcess]:
    """Another fan-out instance of the table, so draining one leaves the table served."""
    process = ServiceProcess("fanout", tmp_path / "laredo.conf", free_port(), tmp_path / "fanout-b.log")
    process.extra_args = ["--set", f"fanout.grpc.port={free_port()}", "--set",
                          f"fanout.health_port={process.health_port}", "--set", f"fanout.instance_id={SECOND_FANOUT}"]
    with serving(process):
        yield process


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def sign_in(page: Page, token: str) -> None:
    await page.fill("#token", token)
    await page.click("#login button")
    await expect(page.locator("#identity")).to_contain_text("admin" if token == ADMIN_TOKEN else "read")


async def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def test_the_console_shows_the_system_and_drains_a_fanout_only_for_the_admin_role(
        system: System, second_fanout: ServiceProcess, browser: Browser) -> None:
    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("dialog", lambda dialog: dialog.accept())  # the confirmation of a destructive action
    console = f"http://127.0.0.1:{system.ports['oam']}/console/"
    await page.goto(console)
    await expect(page.locator("#error")).to_contain_text("Enter a read or admin token")  # auth is on
    await shot(page, "0-no-token")
    await sign_in(page, READ_TOKEN)

    pipeline = page.locator("#pipelines tbody tr", has_text=system.pipeline("replication-fanout"))
    await expect(pipeline).to_contain_text("streaming", timeout=30_000)
    rows = pipeline.locator("td").nth(2)
    await expect(rows).to_have_text("100", timeout=30_000)
    # The page's WatchStatus stream follows row changes from the moment OAM subscribes to the table's subject
    # (which can take a while on a busy machine): change rows only once it does.
    oam_log = system.services["oam"].log_path
    await eventually(lambda: "WatchStatus: following" in oam_log.read_text(errors="replace"), timeout=30,
                     what="OAM following the table's row changes for the page's WatchStatus")
    system.sql(f"INSERT INTO {system.table} (id, name, qty) SELECT g, 'n' || g, g FROM generate_series(101, 125) g")
    await expect(rows).to_have_text("125", timeout=30_000)
    await expect(page.locator("#events")).to_contain_text(f"{system.table} INSERT", timeout=30_000)  # WatchStatus
    instance = page.locator(f"#instances [data-instance='{SECOND_FANOUT}']")
    await expect(instance).to_contain_text("ready", timeout=30_000)
    await shot(page, "1-read-token")

    # The read role: no admin action shown, and the server refuses the drain all the same.
    await expect(instance.get_by_role("button", name="Drain")).to_be_hidden()
    refused = await page.evaluate("""async ([token, instance]) => {
        const answer = await fetch('/laredo.v1.TableSyncOAM/DrainReplication', {method: 'POST',
            headers: {'content-type': 'application/json', authorization: `Bearer ${token}`},
            body: JSON.stringify({instanceId: instance})});
        return [answer.status, await answer.json()];
    }""", [READ_TOKEN, SECOND_FANOUT])
    assert refused[0] == 403 and refused[1]["code"] == "permission_denied", json.dumps(refused)

    await sign_in(page, ADMIN_TOKEN)
    source = page.locator("#sources tbody tr", has_text="pg")
    await source.get_by_role("button", name="Pause").click()
    await expect(pipeline).to_contain_text("paused", timeout=30_000)
    await shot(page, "2-admin-paused")
    await source.get_by_role("button", name="Resume").click()
    await expect(pipeline).to_contain_text("streaming", timeout=30_000)  # the pipeline becomes STREAMING again
    drain = instance.get_by_role("button", name="Drain")
    await expect(drain).to_be_visible()
    await drain.click()
    await expect(instance.locator(".state").first).to_have_text("draining", timeout=30_000)
    await expect(page.locator("#error")).to_be_hidden()
    await shot(page, "3-admin-drained")
