"""An email's insights on its dashboard page, in chromium: sent with the official SDK from a
domain verified against Knot (no DMARC record), the page shows the findings grouped by area
with severity badges and the fix under each, as the API lists them."""

from __future__ import annotations

import time

import pytest
import resend
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_journey import sdk  # noqa: F401  (the SDK's settings, put back)
from tests.dashboard.test_settings_pages import create_key_in_page
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import verified_domain

OWNER = "owner@insights-example.test"
PASSWORD = "a passphrase about deliverability"
DOMAIN = "insights-example.test"


@pytest.mark.usefixtures("sdk")
def test_the_email_page_shows_its_insights_by_area(
    dashboard_server: DashboardServer,
    dns_server: AuthoritativeDnsServer,
    page: Page,
) -> None:
    server = dashboard_server
    server.create_user(OWNER, PASSWORD, team="Insights")
    log_in(page, server, OWNER, PASSWORD)
    resend.api_url, resend.api_key = server.base_url, create_key_in_page(page, server, "Send")
    verified_domain(dns_server, DOMAIN)
    sent = resend.Emails.send(
        {
            "from": f"Shop <shop@{DOMAIN}>",
            "to": ["postmaster@example.org"],
            "subject": "Weekly offers",
            "html": (
                "<p>Our offers of the week on every plant in the catalogue.</p>"
                '<p><a href="https://bit.ly/offers">See them</a></p>'
                '<img src="https://www.insights-example.test/banner.png">'
            ),
        }
    )
    deadline = time.monotonic() + 30
    while "insights" not in (api := resend.Emails.get(sent["id"])):
        assert time.monotonic() < deadline, "the insights were not computed"
        time.sleep(0.2)

    page.goto(server.url(f"/emails/{sent['id']}"))
    section = page.locator("section.insights")
    expect(section.locator("h2")).to_have_text("Insights")
    expect(section.locator("h3")).to_have_text(
        ["Authentication", "Content", "Recipients and history"]
    )
    # Every insight the API lists, in its order, with its severity and fix.
    items = section.locator("li.insight")
    expect(items).to_have_count(len(api["insights"]))
    for index, insight in enumerate(api["insights"]):
        item = items.nth(index)
        expect(item).to_have_attribute("data-insight", insight["code"])
        expect(item.locator(".badge")).to_have_text(insight["severity"])
        expect(item.locator(".insight-message")).to_have_text(insight["message"])
        if insight["fix"]:
            expect(item.locator(".insight-fix")).to_have_text(f"Fix: {insight['fix']}")
    missing = section.locator('[data-insight="dmarc_missing"]')
    expect(missing.locator(".badge")).to_have_class("badge severity-error")
    expect(missing.locator(".insight-fix")).to_contain_text(f"_dmarc.{DOMAIN}")
    for code in ("shortener_link", "image_missing_alt", "role_address", "dkim_aligned"):
        expect(section.locator(f'[data-insight="{code}"]')).to_have_count(1)
    expect(section).to_contain_text("authentication last checked against DNS at")
    section.scroll_into_view_if_needed()
    screenshot(page, "insights-email-page")
