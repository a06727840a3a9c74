"""The example shop's admin in a real browser: headless Chromium driven by Playwright.

It needs Debian's ``chromium`` package (``/usr/bin/chromium``; Playwright's own browser
download is never used). Without it the test is skipped, except in CI (``CI`` set), where
it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.utils import formats, timezone

from django_snowflake import decode
from tests.example import manage, start

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EXAMPLE_TIME_ZONE = ZoneInfo("Europe/Berlin")  # example_project/config/settings.py

try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None

missing = (
    "Playwright is not installed (pip install -e '.[test]')"
    if sync_playwright is None
    else f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if not CHROMIUM.exists()
    else None
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing) and not os.environ.get("CI"), reason=str(missing)),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[str]:
    """The example shop, migrated and seeded, served on a free loopback port."""
    db = tmp_path / "shop.sqlite3"
    manage("migrate", db=db)
    manage("seed_demo", db=db)
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    server = start(
        "runserver", "--noreload", f"127.0.0.1:{port}", db=db, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/admin/login/", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "The example server did not start:\n"
                        + (tmp_path / "server.log").read_text()
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture
def page() -> Iterator[Page]:
    if missing or sync_playwright is None:
        pytest.fail(f"The browser test must run in CI, but {missing}.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 800}, locale="en-US")
        finally:
            browser.close()


def test_admin_shows_decoded_creation_times(shop: str, page: Page, tmp_path: Path) -> None:
    page.goto(f"{shop}/admin/login/?next=/admin/shop/order/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "snowflake")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/shop/order/")

    page.get_by_role("link", name="Today", exact=True).click()
    page.wait_for_url("**/admin/shop/order/?created=today")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 12
    pk = int(rows.first.locator("input.action-select").get_attribute("value") or "")
    shown = rows.first.locator("td.field-snowflake_created").inner_text()
    with timezone.override(EXAMPLE_TIME_ZONE):
        assert shown == formats.localize(timezone.localtime(decode(pk).timestamp))
    # Newest first: the keys decrease down the page.
    keys = [
        int(v or "")
        for v in rows.locator("input.action-select").evaluate_all("l => l.map(e => e.value)")
    ]
    assert keys == sorted(keys, reverse=True)
    screenshot = tmp_path / "admin-changelist.png"
    page.screenshot(path=screenshot)
    assert screenshot.stat().st_size > 10_000
    if target := os.environ.get("SNOWFLAKE_SCREENSHOT_DIR"):
        shutil.copy(screenshot, target)

    # The change page breaks the ID down; adding an order generates its ID in the server.
    rows.first.locator("th a").click()
    breakdown = page.locator("fieldset", has_text="Snowflake ID")
    assert str(decode(pk).worker_id) in breakdown.inner_text()
    page.goto(f"{shop}/admin/shop/order/add/")
    page.select_option("#id_customer", index=1)
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/shop/order/")
    assert page.locator("#result_list tbody tr").count() == 13
