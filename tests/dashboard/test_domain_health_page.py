"""Domain health in chromium, against a live server whose receiver refuses five addresses of a
hundred: the domain's hard bounce rate reaches 5%, critical, and within a round of evaluation
the Domains page says so, the domain's page shows each window's rates against the thresholds,
a banner on every page names the domain and leads to its health, and the Metrics page flags
the rate too."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import resend
from playwright.sync_api import Page

from tests.dashboard.conftest import DashboardServer, StartDashboard, log_in
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import verified_domain, wait_until
from tests.smtp_receiver import ScriptedSmtpReceiver

OWNER = "owner@health-example.test"
PASSWORD = "bounces are a bad sign 42"
DOMAIN = "health-example.test"
REFUSED = [f"gone{i}@example.org" for i in range(5)]


@pytest.fixture
def sdk() -> Iterator[None]:
    saved = resend.api_url, resend.api_key
    yield
    resend.api_url, resend.api_key = saved


# Judged every second rather than every 30: the test waits for a round, not a schedule.
JUDGED_EVERY_SECOND = "health_interval_seconds = 1"


@pytest.fixture
def dashboard_server(start_dashboard: StartDashboard) -> DashboardServer:
    return start_dashboard(metrics_extra=JUDGED_EVERY_SECOND)


def test_a_critical_domain_shows_on_its_pages_and_in_a_banner(
    dashboard_server: DashboardServer,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    page: Page,
    sdk: None,
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Health")
    resend.api_url, resend.api_key = dashboard_server.base_url, dashboard_server.create_key("h")
    domain = verified_domain(dns_server, DOMAIN)
    log_in(page, dashboard_server, OWNER, PASSWORD)
    page.goto(dashboard_server.url("/domains"))
    assert page.locator("#domain-health-banner").count() == 0

    for address in REFUSED:
        smtp_receiver.script.refuse_recipients[address] = "550 5.1.1 no such user"
    recipients = [f"c{i}@example.org" for i in range(100 - len(REFUSED))] + REFUSED
    resend.Batch.send([
        {"from": f"Shop <shop@{DOMAIN}>", "to": to, "subject": "Receipt", "text": "Thanks."}
        for to in recipients
    ])  # type: ignore[arg-type]  # fmt: skip

    def ended() -> bool:
        listed = resend.Emails.list({"limit": 100})["data"]
        return sum(e["last_event"] in ("delivered", "bounced") for e in listed) == 100

    wait_until(ended, "every email delivered or bounced", timeout=120)

    def judged_critical() -> bool:
        page.goto(dashboard_server.url("/domains"))
        return page.locator('[data-domain-health="critical"]').count() == 1

    wait_until(judged_critical, "the domain judged critical", timeout=30)
    assert "Critical" in page.locator('[data-domain-health="critical"]').inner_text()
    banner = page.locator("#domain-health-banner")
    assert DOMAIN in banner.inner_text() and "critical" in banner.inner_text()
    screenshot(page, "domains-health-critical")

    # The banner is on every page, and leads to the domain's health.
    page.goto(dashboard_server.url("/emails"))
    page.locator("#domain-health-banner a").click()
    page.wait_for_url(re.compile(rf"/domains/{domain['id']}#health"))
    section = page.locator("#health")
    assert section.locator('[data-health-state="critical"]').count() == 1
    rows = [row.inner_text() for row in section.locator("tbody tr").all()]
    assert len(rows) == 4  # two windows, two rates each
    bounce_24h = next(r for r in rows if "Last 24 hours" in r and "Hard bounce rate" in r)
    assert re.search(r"5\.0%\s+2\.0%\s+5\.0%\s+100\s+Critical", bounce_24h), bounce_24h
    # 95 delivered: under the 100 a complaint rate is judged on.
    complaints = next(r for r in rows if "Last 7 days" in r and "Complaint rate" in r)
    assert re.search(r"0\.0%\s+0\.1%\s+0\.3%\s+95\s+too few to judge", complaints), complaints
    screenshot(page, "domain-health-section")

    # The Metrics page flags the same rate, judged the same way.
    page.goto(dashboard_server.url("/metrics"))
    bounce = page.locator('[data-metric="bounce_rate"]')
    assert "stat-alarm" in (bounce.get_attribute("class") or "")
    assert "5.0% hard · warning at 2.0%" in bounce.inner_text()
    complaints_stat = page.locator('[data-metric="complaint_rate"]')
    assert "stat-alarm" not in (complaints_stat.get_attribute("class") or "")
