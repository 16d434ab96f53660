"""A team's SSO found by the address: the owner verifies the team's domain (records published
in Knot DNS), names it among the SSO email domains, and a person of that domain, with no
account yet, signs in from "Sign in with SSO" by typing their address and joins the team
(just-in-time provisioning) through the team's OpenID Connect provider on loopback."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import DashboardServer, StartDashboard, free_port, log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_journey import verify_domain
from tests.dns_server import AuthoritativeDnsServer
from tests.oidc_provider import Person, oidc_provider, register_client

DOMAIN = "sso-corp.test"
OWNER = f"owner@{DOMAIN}"
PASSWORD = "a long and careful passphrase 15"
NINA = Person(sub="nina", email=f"nina@{DOMAIN}", name="Nina New")


@pytest.fixture
def issuer() -> Iterator[str]:
    with oidc_provider([NINA]) as url:
        yield url


def save_oidc_settings(
    page: Page, server: DashboardServer, issuer: str, client_id: str, secret: str
) -> None:
    """Fill in and send the team's OpenID Connect settings, with DOMAIN as its email domain."""
    page.goto(server.url("/team/sso"))
    page.check("#protocol-oidc")
    page.fill("#oidc-issuer", issuer)
    page.fill("#oidc-client-id", client_id)
    page.fill("#oidc-client-secret", secret)
    page.fill("#email-domains", DOMAIN)
    page.get_by_role("button", name="Save").click()


def test_a_person_of_the_teams_domain_finds_its_sso_by_address_and_joins(
    page: Page,
    browser: Browser,
    start_dashboard: StartDashboard,
    dns_server: AuthoritativeDnsServer,
    issuer: str,
) -> None:
    port = free_port()
    client_id, secret = register_client(
        issuer, f"http://localhost:{port}/auth/callback/oidc", "openid email profile"
    )
    server = start_dashboard(
        dashboard_listen=f"127.0.0.1:{port}",
        dashboard_public_url=f"http://localhost:{port}",
        auth_extra="allow_private_issuers = true",
    )
    server.create_user(OWNER, PASSWORD, team="SSO Corp")
    log_in(page, server, OWNER, PASSWORD)

    # Naming a domain the team has not verified is refused.
    save_oidc_settings(page, server, issuer, client_id, secret)
    expect(page.get_by_text(f"{DOMAIN} is not a verified domain of this team")).to_be_visible()
    screenshot(page, "sso-team-domain-refused")

    page.goto(server.url("/domains"))
    page.fill("#domain-name", DOMAIN)
    page.click('button:has-text("Add domain")')
    page.wait_for_url(re.compile(r"/domains/[0-9a-f-]{36}$"))
    verify_domain(page, dns_server)

    save_oidc_settings(page, server, issuer, client_id, secret)
    expect(page.get_by_text("Single sign-on settings saved.")).to_be_visible()

    nina = browser.new_context()
    try:
        tab = nina.new_page()
        tab.goto(server.url("/login"))
        tab.get_by_role("link", name="Sign in with SSO").click()
        tab.fill("#sso-email", NINA.email)
        tab.get_by_role("button", name="Continue").click()
        expect(tab.get_by_text("SSO Corp signs in through its identity provider.")).to_be_visible()
        screenshot(tab, "sso-login-continue")
        tab.get_by_role("link", name="Continue to your identity provider").click()
        tab.get_by_role("button", name=NINA.sub, exact=True).click()
        tab.wait_for_url(re.compile(r"/emails"))
        expect(tab.locator(".user-email")).to_have_text(NINA.email)
        expect(tab.locator(".team-name")).to_have_text("SSO Corp")
        tab.goto(server.url("/team"))
        expect(tab.get_by_role("cell", name=NINA.email)).to_be_visible()
        screenshot(tab, "sso-joined-by-domain")
    finally:
        nina.close()
