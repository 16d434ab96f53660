"""The Metrics page in chromium, against a live server that delivered, bounced and tracked real
mail: its totals, rates, charts and table show the counts of those events, for the team, per
hour or day and per domain; it reads the same without JavaScript; another team's domain id in
the URL is a 404, and wrong dates are explained on the page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import resend
from playwright.sync_api import Browser, Page

from tests.dashboard.conftest import PAGE_TIMEOUT_MS, DashboardServer, log_in
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import verified_domain, wait_until
from tests.smtp_receiver import ScriptedSmtpReceiver

OWNER = "owner@metrics-example.test"
PASSWORD = "metrics are better as pictures 9"
DOMAIN = "metrics-example.test"
REFUSED = "gone@example.org"


@pytest.fixture
def sdk() -> Iterator[None]:
    saved = resend.api_url, resend.api_key
    yield
    resend.api_url, resend.api_key = saved


def stat(page: Page, name: str) -> str:
    return page.locator(f'[data-metric="{name}"] .value').inner_text()


def send_and_track(
    server: DashboardServer, dns: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> str:
    """Three emails delivered, one bounced, one opened; two tagged kind:receipt, two
    kind:news; the domain's id."""
    resend.api_url, resend.api_key = server.base_url, server.create_key("metrics")
    domain = verified_domain(dns, DOMAIN)
    resend.Domains.update({"id": domain["id"], "open_tracking": True})
    receiver.script.refuse_recipients[REFUSED] = "550 5.1.1 no such user"
    ids = [
        resend.Emails.send(
            {
                "from": f"Shop <shop@{DOMAIN}>", "to": to, "subject": "Hi", "html": "<p>Hi</p>",
                "tags": [{"name": "kind", "value": "receipt" if n < 2 else "news"}],
            }
        )["id"]
        for n, to in enumerate(("a@example.org", "b@example.org", "c@example.org", REFUSED))
    ]  # fmt: skip
    wait_until(
        lambda: all(resend.Emails.get(i)["last_event"] in ("delivered", "bounced") for i in ids),
        "every email ended",
    )
    # The pixel, fetched at the server's own address (the links name api.public_url).
    content = receiver.received()[0].content.decode()
    token = re.search(r"/t/o/([\w-]+)", content.replace("=\r\n", "").replace("=\n", ""))
    assert token is not None
    assert httpx.get(f"{server.base_url}/t/o/{token.group(1)}").status_code == 200
    return str(domain["id"])


def test_the_metrics_page_shows_the_events_counts(
    dashboard_server: DashboardServer,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    page: Page,
    browser: Browser,
    sdk: None,
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Metrics")
    domain_id = send_and_track(dashboard_server, dns_server, smtp_receiver)

    log_in(page, dashboard_server, OWNER, PASSWORD)
    page.goto(dashboard_server.url("/metrics"))
    assert (stat(page, "sent"), stat(page, "delivered"), stat(page, "bounced")) == ("4", "3", "1")
    assert stat(page, "opened") == "1" and stat(page, "complained") == "0"
    assert stat(page, "bounce_rate") == "25.0%" and stat(page, "complaint_rate") == "0.0%"
    assert "1 hard" in page.locator('[data-metric="bounced"]').inner_text()
    # 25% hard bounces, but of 4 messages: too few to flag (domain health's 100).
    bounce = page.locator('[data-metric="bounce_rate"]')
    assert "25.0% hard" in bounce.inner_text()
    assert "stat-alarm" not in (bounce.get_attribute("class") or "")
    assert page.locator("svg.chart").count() == 4
    assert page.locator("svg.chart rect.series-delivered").count() == 1  # today's bar
    total = page.locator(".metrics-table tfoot").inner_text()
    assert re.search(r"Total\s+4\s+3\s+0\s+1\s+0\s+1\s+0\s+0\s+0\s+25.0%", total), total
    # Pointing at a bar shows its value at once (metrics.js; <title> without JavaScript).
    page.locator("svg.chart rect.series-delivered").hover()
    assert re.fullmatch(r"\d\d \w+ \d{4}: Delivered 3", page.locator(".chart-tip").inner_text())
    screenshot(page, "metrics-7-days")

    # Changing a select applies it (metrics.js): per hour over the last 24 hours.
    page.select_option("#metrics-range", "24h")
    page.wait_for_url(re.compile(r"range=24h"))
    page.select_option("#metrics-granularity", "hour")
    page.wait_for_url(re.compile(r"granularity=hour"))
    assert stat(page, "delivered") == "3"
    assert page.locator(".metrics-table tbody tr").count() == 1  # the one hour with events
    assert page.locator("svg.chart").first.locator("rect").count() == 1
    screenshot(page, "metrics-24-hours-per-hour")

    # One domain: the same counts (the team sends from no other).
    page.select_option("#metrics-domain", domain_id)
    page.wait_for_url(re.compile(rf"domain={domain_id}"))
    assert stat(page, "sent") == "4" and DOMAIN in page.inner_text("h1")
    screenshot(page, "metrics-one-domain")

    # One tag (a domain chosen before is cleared: counts are kept per one or the other).
    page.select_option("#metrics-tag", "kind:receipt")
    page.wait_for_url(re.compile(r"tag=kind%3Areceipt"))
    assert "domain" not in parse_qs(urlsplit(page.url).query)  # left blank
    assert stat(page, "sent") == "2" and "kind:receipt" in page.inner_text("h1")
    page.select_option("#metrics-tag", "kind:news")
    page.wait_for_url(re.compile(r"tag=kind%3Anews"))
    assert (stat(page, "sent"), stat(page, "bounced")) == ("2", "1")
    screenshot(page, "metrics-one-tag")
    page.goto(dashboard_server.url(f"/metrics?domain={domain_id}&tag=kind:news"))
    assert "Choose one of" in page.locator(".flash-error").inner_text()
    assert stat(page, "sent") == "4"  # the domain, chosen first

    # A custom range without the day of the events shows zeros; wrong dates are explained.
    page.goto(dashboard_server.url("/metrics?range=custom&from=2020-01-01&to=2020-01-31"))
    assert stat(page, "sent") == "0" and page.locator(".empty").count() == 1
    assert page.locator("svg.chart").first.locator("rect").count() == 0
    screenshot(page, "metrics-custom-empty")
    page.goto(dashboard_server.url("/metrics?range=custom&from=2020-02-01&to=2020-01-01"))
    assert "ends before it starts" in page.locator(".flash-error").inner_text()
    page.goto(dashboard_server.url("/metrics?range=custom&from=yesterday"))
    assert "YYYY-MM-DD" in page.locator(".flash-error").inner_text()

    # A domain id that is not the team's is a 404, not an empty page.
    response = page.goto(
        dashboard_server.url("/metrics?domain=0190a000-0000-7000-8000-0000000000d9")
    )
    assert response is not None and response.status == 404
    response = page.goto(
        dashboard_server.url("/metrics?broadcast=0190a000-0000-7000-8000-0000000000b9")
    )
    assert response is not None and response.status == 404

    # Without JavaScript the page reads the same (the form submits with its button).
    plain = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    plain.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        no_js = plain.new_page()
        log_in(no_js, dashboard_server, OWNER, PASSWORD)
        no_js.goto(dashboard_server.url("/metrics"))
        assert stat(no_js, "delivered") == "3" and no_js.locator("svg.chart").count() == 4
        no_js.select_option("#metrics-range", "30d")
        no_js.click('.metrics-filters button[type="submit"]')
        no_js.wait_for_url(re.compile(r"range=30d"))
        assert urlsplit(no_js.url).path == "/metrics" and stat(no_js, "sent") == "4"
        screenshot(no_js, "metrics-without-javascript")
    finally:
        plain.close()
