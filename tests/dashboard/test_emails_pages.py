"""The Emails pages in chromium against a live server: mail sent with the `resend` SDK from a
domain verified through Knot, then the list filtered (status, search, tag) and paged both ways,
an email's page with its timeline, its HTML in a sandboxed frame that runs no script, its raw
source downloaded, another team's member refused its id, and a status changing on the open
list without a reload. Every page is screenshotted."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import resend
from playwright.sync_api import Browser, Page

from tests.dashboard.conftest import PAGE_TIMEOUT_MS, DashboardServer, log_in
from tests.dashboard.screenshots import screenshot, screenshot_path
from tests.dashboard.test_journey import (
    DOMAIN,
    add_domain,
    create_api_key,
    reload_until,
    verify_domain,
)
from tests.dns_server import AuthoritativeDnsServer

OWNER = "owner@alpha-example.test"
STRANGER = "owner@beta-example.test"
PASSWORD = "a long and careful passphrase 15"
SENT = 56  # more than a page of 50
SCHEDULED_SUBJECT = "Next week's newsletter"
SCHEDULED_HTML = (
    '<h1 id="greeting">Hello from the frame</h1>'
    "<script>document.body.insertAdjacentHTML('beforeend', '<p id=\"ran\">ran</p>')</script>"
)


def listed(page: Page) -> list[str]:
    return [
        row.get_attribute("data-email-id") or ""
        for row in page.locator("table.emails tbody tr").all()
    ]


def send_mail(server: DashboardServer, token: str) -> str:
    """SENT emails at once (subjects "Receipt 000" on, tags alternating), and one scheduled a
    week ahead, which stays in the queue; the scheduled one's id."""
    resend.api_url, resend.api_key = server.base_url, token
    resend.Batch.send(
        [
            {
                "from": f"Shop <shop@{DOMAIN}>",
                "to": f"customer{n}@example.org",
                "subject": f"Receipt {n:03d}",
                "text": f"Thank you for order {n}.",
                "tags": [{"name": "category", "value": "welcome" if n % 2 else "receipt"}],
            }
            for n in range(SENT)
        ]
    )
    scheduled = resend.Emails.send(
        {
            "from": f"News <news@{DOMAIN}>",
            "to": "reader@example.org",
            "subject": SCHEDULED_SUBJECT,
            "html": SCHEDULED_HTML,
            "text": "Hello from the text part",
            "scheduled_at": (datetime.now(UTC) + timedelta(days=7)).isoformat(),
        }
    )
    return str(scheduled["id"])


def check_list_filters_and_paging(page: Page, server: DashboardServer, scheduled_id: str) -> None:
    page.goto(server.url("/emails"))
    first = listed(page)
    assert len(first) == 50 and first[0] == scheduled_id  # newest first
    screenshot(page, "emails-01-list")

    page.click("nav.pager >> text=Older")
    older = listed(page)
    assert len(older) == SENT + 1 - 50 and not set(older) & set(first)
    assert page.locator("nav.pager >> text=Older").count() == 0
    screenshot(page, "emails-02-older-page")
    page.click("nav.pager >> text=Newer")
    assert listed(page) == first

    page.select_option("#status", "scheduled")
    page.click('form.filters button[type="submit"]')
    assert listed(page) == [scheduled_id]
    assert urlsplit(page.url).query == "status=scheduled" or "status=scheduled" in page.url
    screenshot(page, "emails-03-filtered-status")

    page.goto(server.url("/emails"))
    page.fill("#q", "receipt 007")
    page.click('form.filters button[type="submit"]')
    assert len(listed(page)) == 1
    assert "Receipt 007" in page.locator("table.emails").inner_text()
    screenshot(page, "emails-04-search")

    page.goto(server.url("/emails?tag=category%3Dwelcome"))
    welcome = listed(page)
    assert len(welcome) == SENT // 2
    page.goto(server.url("/emails?tag=category%3Dwelcome&status=delivered&q=customer1"))
    narrowed = listed(page)
    assert 0 < len(narrowed) < len(welcome) and set(narrowed) <= set(welcome)
    page.goto(server.url("/emails?status=bounced"))
    assert listed(page) == [] and "No email matches" in page.inner_text("main")


def check_email_page(page: Page, server: DashboardServer, email_id: str, downloads: Path) -> None:
    page.goto(server.url("/emails"))
    page.click(f'tr[data-email-id="{email_id}"] a')
    page.wait_for_url(re.compile(rf"/emails/{email_id}$"))
    assert page.inner_text("h1") == SCHEDULED_SUBJECT
    assert "scheduled" in page.locator("ol.timeline").inner_text()
    assert "Hello from the text part" in page.locator("pre.email-text").inner_text()
    assert "DKIM-Signature" in page.locator("table.headers").inner_text()

    frame_element = page.locator("iframe.email-html")
    assert frame_element.get_attribute("sandbox") == ""
    frame = page.frame_locator("iframe.email-html")
    assert frame.locator("#greeting").inner_text() == "Hello from the frame"
    assert frame.locator("#ran").count() == 0  # its script never ran
    # Chromium paints an offscreen frame of another origin (a sandboxed one is) only once
    # it has been in view: show it before the screenshots.
    frame_element.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    screenshot(page, "emails-05-email-page")
    frame_element.screenshot(path=str(screenshot_path("emails-05-email-html-frame")))

    with page.expect_download() as download_info:
        page.click(f'a[href="/emails/{email_id}/raw"]')
    download = download_info.value
    assert download.suggested_filename == f"{email_id}.eml"
    saved = downloads / download.suggested_filename
    download.save_as(saved)
    source = saved.read_bytes()
    assert source.startswith(b"DKIM-Signature:")
    assert f"Subject: {SCHEDULED_SUBJECT}".encode() in source


def check_another_team_is_refused(browser: Browser, server: DashboardServer, email_id: str) -> None:
    server.create_user(STRANGER, PASSWORD, team="Beta")
    profile = browser.new_context(viewport={"width": 1280, "height": 900})
    profile.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        stranger = profile.new_page()
        log_in(stranger, server, STRANGER, PASSWORD)
        stranger.goto(server.url("/emails"))
        assert listed(stranger) == []
        for path in ("", "/html", "/raw"):
            response = stranger.goto(server.url(f"/emails/{email_id}{path}"))
            assert response is not None and response.status == 404, path
        assert SCHEDULED_SUBJECT not in stranger.content()
        screenshot(stranger, "emails-06-another-teams-email")
    finally:
        profile.close()


def check_live_status(page: Page, server: DashboardServer, email_id: str) -> None:
    """The open list's badge of the scheduled email turns `canceled` when it is cancelled
    through the API, without a reload (emails.js asks for the statuses that may change)."""
    page.goto(server.url("/emails?status=scheduled"))
    badge = page.locator(f'tr[data-email-id="{email_id}"] .badge')
    assert badge.inner_text() == "scheduled"
    resend.Emails.cancel(email_id)
    page.wait_for_function(
        "id => document.querySelector(`tr[data-email-id='${id}'] .badge`).textContent"
        " === 'canceled'",
        arg=email_id,
        timeout=20_000,
    )
    assert "status-canceled" in (badge.get_attribute("class") or "")
    screenshot(page, "emails-07-live-status")
    page.goto(server.url("/emails?status=canceled"))  # the status index moved with it
    assert listed(page) == [email_id]
    assert page.locator(f'tr[data-email-id="{email_id}"] .badge').inner_text() == "canceled"


def test_the_emails_pages(
    dashboard_server: DashboardServer,
    dns_server: AuthoritativeDnsServer,
    page: Page,
    browser: Browser,
    tmp_path: Path,
) -> None:
    saved = resend.api_url, resend.api_key
    try:
        dashboard_server.create_user(OWNER, PASSWORD, team="Alpha")
        log_in(page, dashboard_server, OWNER, PASSWORD)
        add_domain(page, dashboard_server)
        verify_domain(page, dns_server)
        token = create_api_key(page, dashboard_server)
        scheduled_id = send_mail(dashboard_server, token)
        page.goto(dashboard_server.url("/emails?status=delivered"))
        reload_until(
            page,
            lambda: len(listed(page)) == 50 and page.locator("nav.pager >> text=Older").count() > 0,
            "more than a page of emails is delivered",
            timeout=60,
        )
        check_list_filters_and_paging(page, dashboard_server, scheduled_id)
        check_email_page(page, dashboard_server, scheduled_id, tmp_path)
        check_another_team_is_refused(browser, dashboard_server, scheduled_id)
        check_live_status(page, dashboard_server, scheduled_id)
    finally:
        resend.api_url, resend.api_key = saved
