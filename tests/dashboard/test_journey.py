"""The dashboard end to end, as a person uses it in chromium: log in as the owner created from
the shell, add a domain and publish its records in Knot DNS, verify it, create an API key and
read its token off the page, send with the official `resend` SDK, watch the email turn
`delivered` on the Emails page (live, then on a reload), open its page, then Metrics and every
other page of the menu. Every page is screenshotted."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
import resend
from playwright.sync_api import Locator, Page, expect

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer
from tests.smtp_receiver import ScriptedSmtpReceiver

OWNER = "owner@journey-example.test"
PASSWORD = "a long and careful passphrase 15"
DOMAIN = "journey-example.test"
RECIPIENT = "ann@example.org"
SUBJECT = "Your order has shipped"
# The receiver answers the end of DATA this late: long enough to see the email not delivered yet.
RECEIVER_DELAY_S = 10
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture
def sdk() -> Iterator[None]:
    """The `resend` SDK's module-wide settings, put back after the test."""
    saved = resend.api_url, resend.api_key
    yield
    resend.api_url, resend.api_key = saved


def path_of(page: Page) -> str:
    return urlsplit(page.url).path


def reload_until(page: Page, done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Reload the page, as a person waiting would, until `done()`; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.5)
        page.reload()


def add_domain(page: Page, server: DashboardServer) -> str:
    """Add DOMAIN on the Domains page; its id, from the domain's page it leads to."""
    page.goto(server.url("/domains"))
    screenshot(page, "journey-03-domains-empty")
    page.fill("#domain-name", DOMAIN)
    page.click('button:has-text("Add domain")')
    page.wait_for_url(re.compile(rf"/domains/{UUID}$"))
    assert DOMAIN in page.inner_text("h1")
    return path_of(page).rsplit("/", 1)[1]


def publish_records(page: Page, dns: AuthoritativeDnsServer) -> int:
    """Publish in Knot each DNS record the domain's page lists, read off the page as a person
    copies them to their DNS provider; how many."""
    rows = page.locator("table.dns-records tbody tr")
    for n in range(rows.count()):
        cells = rows.nth(n).locator("td")
        rtype = cells.nth(0).inner_text().split()[0]
        host = cells.nth(1).locator("code").inner_text().strip()
        value = cells.nth(2).locator("code").inner_text().strip()
        if rtype == "MX":
            dns.publish(host, "MX", f"{cells.nth(3).inner_text().strip()} {value}.")
        else:
            dns.publish(host, rtype, value)
    return rows.count()


def heading_badge(page: Page) -> Locator:
    return page.locator("h1 .badge")


def verify_domain(page: Page, dns: AuthoritativeDnsServer) -> None:
    assert publish_records(page, dns) >= 3  # SPF and MX of the return path, DKIM at least
    page.click('button:has-text("Verify now")')
    reload_until(
        page,
        lambda: "status-verified" in (heading_badge(page).get_attribute("class") or ""),
        "the domain's page shows it verified",
    )
    statuses = page.locator("table.dns-records .badge").all_inner_texts()
    assert statuses and all(status == "Verified" for status in statuses), statuses


def create_api_key(page: Page, server: DashboardServer) -> str:
    """Create a full-access key on the API keys page; the token it shows this once."""
    page.goto(server.url("/api-keys"))
    page.fill("#key-name", "journey")
    page.click('button:has-text("Create key")')
    token = page.locator("#new-token").inner_text().strip()
    assert re.fullmatch(r"re_\w+", token), token
    screenshot(page, "journey-05-api-key-created")
    page.goto(server.url("/api-keys"))
    assert page.locator("#new-token").count() == 0  # shown once, never again
    assert "journey" in page.locator("table.table").inner_text()
    return token


def send_with_sdk(server: DashboardServer, token: str) -> str:
    resend.api_url, resend.api_key = server.base_url, token
    sent = resend.Emails.send(
        {
            "from": f"Shop <shop@{DOMAIN}>",
            "to": RECIPIENT,
            "subject": SUBJECT,
            "html": "<p>Your parcel is on its way.</p>",
            "text": "Your parcel is on its way.",
            "tags": [{"name": "category", "value": "shipping"}],
        }
    )
    return str(sent["id"])


def watch_delivered(page: Page, server: DashboardServer, email_id: str) -> None:
    """The Emails page lists the email while the receiver still holds its DATA, and its
    badge turns `delivered` live (emails.js asks every few seconds), then on a reload too."""
    page.goto(server.url("/emails"))
    row = page.locator(f'tr[data-email-id="{email_id}"]')
    reload_until(page, lambda: row.count() == 1, "the email is listed")
    assert RECIPIENT in row.inner_text() and SUBJECT in row.inner_text()
    assert row.locator(".badge").inner_text() in ("queued", "sent")
    screenshot(page, "journey-06-emails-sent")
    expect(row.locator(".badge")).to_have_text("delivered", timeout=RECEIVER_DELAY_S * 4000)
    page.reload()
    assert row.locator(".badge").inner_text() == "delivered"
    screenshot(page, "journey-07-emails-delivered")


def open_email_page(page: Page, email_id: str) -> None:
    page.click(f'tr[data-email-id="{email_id}"] a')
    page.wait_for_url(re.compile(rf"/emails/{email_id}$"))
    assert page.inner_text("h1") == SUBJECT
    timeline = page.locator("ol.timeline").inner_text()
    assert "delivered" in timeline and RECIPIENT in timeline, timeline
    assert "Your parcel is on its way." in page.locator("pre.email-text").inner_text()
    # The HTML part in a sandboxed frame: no scripts, no same-origin access.
    frame = page.locator("iframe.email-html")
    assert frame.get_attribute("sandbox") == ""
    shown = page.frame_locator("iframe.email-html").locator("body")
    assert shown.inner_text().strip() == "Your parcel is on its way."
    screenshot(page, "journey-08-email-page")


def open_metrics(page: Page) -> None:
    page.click("nav.nav >> text=Metrics")
    page.wait_for_url(re.compile(r"/metrics"))
    value = page.locator('[data-metric="delivered"] .value').inner_text()
    assert value == "1", value
    assert page.locator('[data-metric="sent"] .value').inner_text() == "1"
    screenshot(page, "journey-09-metrics")


def visit_every_page(page: Page) -> None:
    """Every page of the main menu opens as itself (no error page) and is screenshotted."""
    labels = page.locator("nav.nav a").all_inner_texts()
    assert labels[:2] == ["Emails", "Metrics"], labels
    for n, label in enumerate(labels, start=1):
        page.click(f"nav.nav >> text={label}")
        page.wait_for_load_state()
        assert page.locator('nav.nav a[aria-current="page"]').inner_text() == label
        assert page.inner_text("h1"), f"{label}: no heading"
        screenshot(page, f"journey-10-page-{n:02d}-{label.lower()}")


def test_an_owner_sends_from_a_new_domain_and_watches_the_email_delivered(
    dashboard_server: DashboardServer,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    page: Page,
    sdk: None,
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Journey")
    page.goto(dashboard_server.url("/"))
    assert path_of(page) == "/login"
    screenshot(page, "journey-01-login")

    log_in(page, dashboard_server, OWNER, PASSWORD)
    assert path_of(page) == "/emails"  # the landing page
    screenshot(page, "journey-02-emails-empty")

    add_domain(page, dashboard_server)
    screenshot(page, "journey-04-domain-added")
    verify_domain(page, dns_server)
    screenshot(page, "journey-04-domain-verified")

    token = create_api_key(page, dashboard_server)
    smtp_receiver.script.delay_data_end_seconds = RECEIVER_DELAY_S
    email_id = send_with_sdk(dashboard_server, token)
    watch_delivered(page, dashboard_server, email_id)
    (received,) = smtp_receiver.received()
    assert received.rcpt_tos == [RECIPIENT]

    open_email_page(page, email_id)
    open_metrics(page)
    visit_every_page(page)
