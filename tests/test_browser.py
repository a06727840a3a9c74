"""The example shop's admin in a real browser: headless Chromium driven by Playwright.

It needs Debian's ``chromium`` package (``/usr/bin/chromium``; Playwright's own browser
download is never used). Without it the test is skipped, except in CI (``CI`` set), where
it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
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


def order_keys(page: Page) -> list[int]:
    return [
        int(value or "")
        for value in page.locator("#result_list input.action-select").evaluate_all(
            "l => l.map(e => e.value)"
        )
    ]


def test_admin_shows_decoded_creation_times(shop: str, page: Page, tmp_path: Path) -> None:
    log_in(page, shop, "/admin/shop/order/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 12
    pk = int(rows.first.locator("input.action-select").get_attribute("value") or "")
    cell = rows.first.locator("td.field-snowflake_created span")
    with timezone.override(EXAMPLE_TIME_ZONE):
        local = timezone.localtime(decode(pk).timestamp)
        # To the second on the page, to the millisecond on hover.
        assert cell.inner_text() == f"{formats.date_format(local, 'DATE_FORMAT')} {local:%H:%M:%S}"
        assert cell.get_attribute("title") == local.isoformat(timespec="milliseconds")
    # Newest first: the keys decrease down the page. seed_demo placed the orders over 420
    # days, so the created column tells them apart.
    keys = order_keys(page)
    assert keys == sorted(keys, reverse=True)
    created = page.locator("#result_list td.field-snowflake_created").all_inner_texts()
    assert len({text.rsplit(" ", 1)[0] for text in created}) > 8  # days
    # The filter's choices differ from "All": 7 orders in the past 7 days, fewer today.
    page.get_by_role("link", name="Past 7 days", exact=True).click()
    page.wait_for_url("**/admin/shop/order/?created=past_7_days")
    assert rows.count() == 7
    page.get_by_role("link", name="Today", exact=True).click()
    page.wait_for_url("**/admin/shop/order/?created=today")
    assert rows.count() < 7

    # The change page breaks the ID down; adding an order generates its ID in the server.
    page.goto(f"{shop}/admin/shop/order/{pk}/change/")
    breakdown = page.locator("fieldset", has_text="Snowflake ID")
    assert str(decode(pk).worker_id) in breakdown.inner_text()
    page.goto(f"{shop}/admin/shop/order/add/")
    page.select_option("#id_customer", index=1)
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/shop/order/")
    assert rows.count() == 13


@pytest.mark.parametrize(
    ("search", "found"),
    [
        # Pasted from the order's page, with the spaces a copy brings along.
        (" {2} ", [2]),
        ("{2} {5}", [2, 5]),
        ("{2}, {5}", [2, 5]),
        # The customer search still works, and a malformed ID finds nothing.
        ("Ada", None),
        ("{2}x", []),
    ],
)
def test_the_order_list_finds_pasted_ids(
    shop: str, page: Page, search: str, found: list[int] | None
) -> None:
    log_in(page, shop, "/admin/shop/order/")
    keys = order_keys(page)
    page.fill("#searchbar", search.format(*keys))
    with page.expect_navigation():
        page.press("#searchbar", "Enter")
    if found is None:
        names = page.locator("#result_list td.field-customer").all_inner_texts()
        assert names and set(names) == {"Ada Lovelace"}
    else:
        assert sorted(order_keys(page)) == sorted(keys[i] for i in found)
        assert page.locator("#content h1").count() == 1  # a page, not an error


# Keys and times stay on one line ("Order 2514000286…" wrapped): broken, they read as two values.
WRAPPED = """() => [...document.querySelectorAll('#result_list .field-number, #result_list .field-snowflake_created')]
    .filter(cell => {
        const range = document.createRange();
        range.selectNodeContents(cell);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0)
            .map(r => Math.round(r.bottom)));
        return lines.size > 1;
    }).map(cell => cell.innerText)"""

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
    # A command claims a slot of its own and releases it: a row a later claim reuses.
    manage("show_worker", db=tmp_path / "shop.sqlite3")

    for language, words in LANGUAGE_WORDS.items():
        # The switcher in the header posts to Django's set_language view.
        page.goto(f"{shop}/admin/shop/order/")
        with page.expect_navigation():
            page.select_option("#language-select", language)
        page.goto(f"{shop}/admin/shop/order/?created=past_7_days")
        assert words["filter"] in page.locator("#changelist-filter").inner_text()
        # The example's own names, in the page's language too.
        assert page.locator("#content h1").inner_text() == words["orders"]
        filters = page.locator("#changelist-filter").inner_text()
        assert all(choice in filters for choice in words["statuses"]), filters
        assert page.locator("#result_list thead th.column-number").inner_text() == words["order"]
        assert page.evaluate(OVERFLOWING) == []
        assert page.evaluate(WRAPPED) == []
        save_screenshot(page, tmp_path, f"admin-orders-{language}-{width}")

        page.goto(f"{shop}/admin/django_snowflake/workernode/")
        table = page.locator("#result_list")
        assert page.evaluate(OVERFLOWING) == []
        # One sort key: no sort-priority numbers on the headers.
        assert page.locator("#result_list .sortpriority").count() == 0
        states = table.locator("td.field-lease").all_inner_texts()
        # Live slots first (the server's: it may reuse seed_demo's slot), then the rows a
        # later claim reuses (show_worker's).
        assert states[0] == words["active"], states
        assert states[-1] == words["released"], states
        save_screenshot(page, tmp_path, f"admin-workers-{language}-{width}")

        active = table.locator("tr", has_text=words["active"]).locator("th a")
        active.click()
        page.wait_for_url("**/change/")
        text = page.locator("#content-main").inner_text()
        assert words["layout"] in text
        assert "In layout time units" not in text
        # One time format; the reservation explained; the epoch in UTC; the title translated;
        # SQLite has no incarnation, so nothing was first seen.
        assert not re.search(r"\b[ap]\.m\.", text), text
        assert words["reservation"] in text
        assert words["epoch"] in text
        assert page.locator("#content h2").first.inner_text().startswith(words["title"])
        assert words["first seen"] not in text
        save_screenshot(page, tmp_path, f"admin-worker-{language}-{width}", full_page=True)

        # Deleting an active slot: a page that says why not, with a way back.
        page.goto(page.url.replace("/change/", "/delete/"))
        assert words["refused"] in page.locator("#content").inner_text()
        page.get_by_role("link", name=words["back"]).click()
        page.wait_for_url("**/change/")


LANGUAGE_WORDS: dict[str, dict[str, Any]] = {
    "en": {
        "filter": "By creation date",
        "orders": "Select order to change",
        "statuses": ["Pending", "Paid", "Shipped"],
        "order": "ORDER",
        "active": "Active",
        "released": "Released: free for the next claim",
        "reservation": "The lease's reservation",
        "epoch": "since Jan. 1, 2025 00:00:00 UTC",
        "title": "worker ",
        "first seen": "incarnation first seen",
        "layout": "41 bits of time, 10 bits of worker, 12 bits of sequence",
        "refused": "This worker slot is active",
        "back": "Back to the worker slot",
    },
    "de": {
        "filter": "Nach Erstellungsdatum",
        "orders": "Bestellung zur Änderung auswählen",
        "statuses": ["Offen", "Bezahlt", "Versandt"],
        "order": "BESTELLUNG",
        "active": "Aktiv",
        "released": "Freigegeben: frei für die nächste Belegung",
        "reservation": "Die Reservierung des Leases",
        "epoch": "seit 1. Januar 2025 00:00:00 UTC",
        "title": "Worker ",
        "first seen": "Inkarnation zuerst gesehen",
        "layout": "41 Bit für Zeit, 10 Bit für Worker, 12 Bit für Sequenz",
        "refused": "Dieser Worker-Slot ist aktiv",
        "back": "Zurück zum Worker-Slot",
    },
}
