"""While the sandbox runs, chromium sees its banner on every page, signed in or not: nothing
leaves the machine, and the addresses that fail on purpose."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.dashboard.conftest import StartDashboard, log_in

OWNER = "owner@sandbox-banner.test"
PASSWORD = "nothing leaves this machine 7"
PAGES = ["/emails", "/metrics", "/broadcasts", "/contacts", "/domains", "/api-keys",
         "/webhooks", "/suppressions", "/team", "/account"]  # fmt: skip


def test_the_sandbox_banner_is_on_every_page(page: Page, start_dashboard: StartDashboard) -> None:
    server = start_dashboard(sandbox=True)
    server.create_user(OWNER, PASSWORD)
    page.goto(server.url("/login"))
    banner = page.locator("#sandbox-banner")
    expect(banner).to_contain_text("no email leaves this machine")
    log_in(page, server, OWNER, PASSWORD)
    for path in PAGES:
        page.goto(server.url(path))
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("bounced@, complained@, delayed@ or suppressed@")
        expect(banner).to_contain_text("sandbox.postwire.test")
    # The domain every team sends from in the sandbox is on the Domains page, verified.
    page.goto(server.url("/domains"))
    expect(page.get_by_text("sandbox.postwire.test").first).to_be_visible()
