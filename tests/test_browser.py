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
    from playwright.sync_api import Browser, Page, sync_playwright
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
def browser() -> Iterator[Browser]:
    if missing or sync_playwright is None:
        pytest.fail(f"The browser test must run in CI, but {missing}.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Browser) -> Page:
    return browser.new_page(viewport={"width": 1280, "height": 800}, locale="en-US")


def log_in(page: Page, shop: str, next_url: str) -> None:
    page.goto(f"{shop}/admin/login/?next={next_url}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "snowflake")
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_url}")


def save_screenshot(page: Page, tmp_path: Path, name: str, *, full_page: bool = False) -> None:
    """Keep a screenshot, and copy it to ``SNOWFLAKE_SCREENSHOT_DIR`` (docs/_static) if set."""
    screenshot = tmp_path / f"{name}.png"
    page.screenshot(path=screenshot, full_page=full_page)
    assert screenshot.stat().st_size > 10_000
    if target := os.environ.get("SNOWFLAKE_SCREENSHOT_DIR"):
        shutil.copy(screenshot, target)


def test_admin_shows_decoded_creation_times(shop: str, page: Page, tmp_path: Path) -> None:
    log_in(page, shop, "/admin/shop/order/")
    page.get_by_role("link", name="Today", exact=True).click()
    page.wait_for_url("**/admin/shop/order/?created=today")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 12
    pk = int(rows.first.locator("input.action-select").get_attribute("value") or "")
    cell = rows.first.locator("td.field-snowflake_created span")
    with timezone.override(EXAMPLE_TIME_ZONE):
        local = timezone.localtime(decode(pk).timestamp)
        # To the second on the page, to the millisecond on hover.
        assert cell.inner_text() == f"{formats.date_format(local, 'DATE_FORMAT')} {local:%H:%M:%S}"
        assert cell.get_attribute("title") == local.isoformat(timespec="milliseconds")
    # Newest first: the keys decrease down the page.
    keys = [
        int(v or "")
        for v in rows.locator("input.action-select").evaluate_all("l => l.map(e => e.value)")
    ]
    assert keys == sorted(keys, reverse=True)

    # The change page breaks the ID down; adding an order generates its ID in the server.
    rows.first.locator("th a").click()
    breakdown = page.locator("fieldset", has_text="Snowflake ID")
    assert str(decode(pk).worker_id) in breakdown.inner_text()
    page.goto(f"{shop}/admin/shop/order/add/")
    page.select_option("#id_customer", index=1)
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/shop/order/")
    assert page.locator("#result_list tbody tr").count() == 13


# Every cell and header of a changelist shows its whole text: nothing cut off ("LAST HE…").
OVERFLOWING = """() => {
    const cells = [...document.querySelectorAll('#result_list th, #result_list td')];
    const cut = cells.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText);
    const results = document.querySelector('#changelist .results');
    if (results && results.scrollWidth > results.clientWidth + 1) cut.push('(table scrolls)');
    return cut;
}"""


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_worker_admin_in_two_languages(
    shop: str, browser: Browser, tmp_path: Path, width: int
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900}, locale="en-US")
    # Adding an order makes the server claim a worker slot: an active row.
    log_in(page, shop, "/admin/shop/order/add/")
    page.select_option("#id_customer", index=1)
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/shop/order/")

    for language, words in LANGUAGE_WORDS.items():
        # The switcher in the header posts to Django's set_language view.
        page.goto(f"{shop}/admin/shop/order/")
        with page.expect_navigation():
            page.select_option("#language-select", language)
        page.goto(f"{shop}/admin/shop/order/?created=today")
        assert words["filter"] in page.locator("#changelist-filter").inner_text()
        assert page.evaluate(OVERFLOWING) == []
        save_screenshot(page, tmp_path, f"admin-orders-{language}-{width}")

        page.goto(f"{shop}/admin/django_snowflake/workernode/")
        table = page.locator("#result_list")
        assert page.evaluate(OVERFLOWING) == []
        # One sort key: no sort-priority numbers on the headers.
        assert page.locator("#result_list .sortpriority").count() == 0
        states = table.locator("td.field-lease").all_inner_texts()
        assert words["active"] in states  # the server's (it may reuse seed_demo's slot)
        save_screenshot(page, tmp_path, f"admin-workers-{language}-{width}")

        active = table.locator("tr", has_text=words["active"]).locator("th a")
        active.click()
        page.wait_for_url("**/change/")
        text = page.locator("#content-main").inner_text()
        assert words["layout"] in text
        assert "In layout time units" not in text
        save_screenshot(page, tmp_path, f"admin-worker-{language}-{width}", full_page=True)

        # Deleting an active slot: a page that says why not, with a way back.
        page.goto(page.url.replace("/change/", "/delete/"))
        assert words["refused"] in page.locator("#content").inner_text()
        page.get_by_role("link", name=words["back"]).click()
        page.wait_for_url("**/change/")


LANGUAGE_WORDS = {
    "en": {
        "filter": "By creation date",
        "active": "Active",
        "layout": "41 bits of time, 10 bits of worker, 12 bits of sequence",
        "refused": "This worker slot is active",
        "back": "Back to the worker slot",
    },
    "de": {
        "filter": "Nach Erstellungsdatum",
        "active": "Aktiv",
        "layout": "41 Bit für Zeit, 10 Bit für Worker, 12 Bit für Sequenz",
        "refused": "Dieser Worker-Slot ist aktiv",
        "back": "Zurück zum Worker-Slot",
    },
}
