"""Sign-in with Google, GitHub and a team's own OpenID Connect provider, in chromium, through a
real OpenID Connect provider on loopback (oidc-provider-mock: authlib, RS256 ID tokens, its own
authorization page), and SAML 2.0 through a pysaml2 IdP on loopback. Screenshots of every page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import DashboardServer, StartDashboard, free_port, log_in
from tests.dashboard.screenshots import screenshot
from tests.oidc_provider import Person, oidc_provider, register_client
from tests.saml_idp import SamlIdp, saml_idp

ANN = Person(sub="ann", email="ann@corp.example", name="Ann Lee")
BOB = Person(sub="bob", email="bob@corp.example", name="Bob Roe")
UNVERIFIED = Person(sub="eve", email="eve@corp.example", name="Eve", email_verified=False)
OWNER_PASSWORD = "correct horse battery staple"


@pytest.fixture
def provider() -> Iterator[str]:
    with oidc_provider([ANN, BOB, UNVERIFIED]) as issuer:
        yield issuer


@pytest.fixture
def idp() -> Iterator[SamlIdp]:
    with saml_idp() as running:
        yield running


def _start(start_dashboard: StartDashboard, auth_extra: str, signup: str) -> DashboardServer:
    port = free_port()
    return start_dashboard(
        dashboard_listen=f"127.0.0.1:{port}",
        dashboard_public_url=f"http://localhost:{port}",
        auth_signup=signup,
        auth_extra=auth_extra + "\nallow_private_issuers = true",
    )


def _authorize_as(page: Page, person: Person) -> None:
    """On the provider's authorization page, sign in as `person` (one button each)."""
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    page.get_by_role("button", name=person.sub, exact=True).click()


def test_sign_in_with_google_makes_an_account_when_sign_up_is_open(
    page: Page, start_dashboard: StartDashboard, provider: str
) -> None:
    server = _start(
        start_dashboard,
        f'google_client_id = "postwire-google"\ngoogle_client_secret = "s3cret"\n'
        f'google_issuer = "{provider}"',
        signup="open",
    )
    page.goto(server.url("/login?next=/metrics"))
    screenshot(page, "sso-login-page")
    page.get_by_role("link", name="Sign in with Google").click()
    screenshot(page, "sso-google-provider")
    _authorize_as(page, ANN)
    page.wait_for_url(re.compile(r"/metrics"))
    expect(page.locator(".user-email")).to_have_text(ANN.email)
    screenshot(page, "sso-google-signed-in")

    # Signing in again finds the same account (linked by its verified address).
    page.context.clear_cookies()
    page.goto(server.url("/login"))
    page.get_by_role("link", name="Sign in with Google").click()
    _authorize_as(page, ANN)
    page.wait_for_url(re.compile(r"/emails"))
    expect(page.locator(".team-name")).to_have_text("Ann Lee's team")


def test_an_unverified_address_is_refused_in_words(
    page: Page, start_dashboard: StartDashboard, provider: str
) -> None:
    server = _start(
        start_dashboard,
        f'google_client_id = "postwire-google"\ngoogle_client_secret = "s3cret"\n'
        f'google_issuer = "{provider}"',
        signup="open",
    )
    page.goto(server.url("/login/google"))
    _authorize_as(page, UNVERIFIED)
    expect(page.get_by_role("heading", name="Sign-in did not complete")).to_be_visible()
    expect(page.get_by_text("has not verified the address eve@corp.example")).to_be_visible()
    screenshot(page, "sso-refused-unverified")


def test_invite_only_refuses_an_unknown_address(
    page: Page, start_dashboard: StartDashboard, provider: str
) -> None:
    server = _start(
        start_dashboard,
        f'google_client_id = "postwire-google"\ngoogle_client_secret = "s3cret"\n'
        f'google_issuer = "{provider}"',
        signup="invite_only",
    )
    page.goto(server.url("/login/google"))
    _authorize_as(page, BOB)
    expect(page.get_by_text("No account uses bob@corp.example")).to_be_visible()


def test_sign_in_with_github_links_the_existing_account(
    page: Page, start_dashboard: StartDashboard, provider: str
) -> None:
    port = free_port()
    client_id, secret = register_client(
        provider, f"http://localhost:{port}/auth/callback/github", "read:user user:email"
    )
    server = start_dashboard(
        dashboard_listen=f"127.0.0.1:{port}",
        dashboard_public_url=f"http://localhost:{port}",
        auth_extra=(
            f'github_client_id = "{client_id}"\ngithub_client_secret = "{secret}"\n'
            f'github_authorize_url = "{provider}/oauth2/authorize"\n'
            f'github_token_url = "{provider}/oauth2/token"\n'
            f'github_api_url = "{provider}/github"'
        ),
    )
    server.create_user(BOB.email, OWNER_PASSWORD, team="Roe & Co")
    page.goto(server.url("/login"))
    page.get_by_role("link", name="Sign in with GitHub").click()
    _authorize_as(page, BOB)
    page.wait_for_url(re.compile(r"/emails"))
    expect(page.locator(".user-email")).to_have_text(BOB.email)
    expect(page.locator(".team-name")).to_have_text("Roe & Co")
    screenshot(page, "sso-github-signed-in")


def test_a_team_signs_in_through_its_own_openid_connect_provider(
    page: Page, start_dashboard: StartDashboard, provider: str
) -> None:
    port = free_port()
    client_id, secret = register_client(
        provider, f"http://localhost:{port}/auth/callback/oidc", "openid email profile"
    )
    server = start_dashboard(
        dashboard_listen=f"127.0.0.1:{port}",
        dashboard_public_url=f"http://localhost:{port}",
        auth_extra="allow_private_issuers = true",
    )
    server.create_user(ANN.email, OWNER_PASSWORD, team="Corp")
    log_in(page, server, ANN.email, OWNER_PASSWORD)
    page.goto(server.url("/team/sso"))
    page.check("#protocol-oidc")
    page.fill("#oidc-issuer", provider)
    page.fill("#oidc-client-id", client_id)
    page.fill("#oidc-client-secret", secret)
    page.check("#enforce-sso")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Single sign-on settings saved.")).to_be_visible()
    screenshot(page, "sso-team-settings")
    sign_in_link = page.locator("code").first.inner_text()

    # Bob is invited as a member; he has no password: the team's provider signs him in.
    page.goto(server.url("/team"))
    page.fill("#invite-email", BOB.email)
    page.locator("#invite-form button[type=submit]").click()
    expect(page.get_by_role("cell", name=BOB.email)).to_be_visible()

    bob = page.context.browser.new_context()  # type: ignore[union-attr]
    try:
        tab = bob.new_page()
        tab.goto(sign_in_link)
        _authorize_as(tab, BOB)
        tab.wait_for_url(re.compile(r"/emails"))
        expect(tab.locator(".user-email")).to_have_text(BOB.email)
        expect(tab.locator(".team-name")).to_have_text("Corp")
        screenshot(tab, "sso-team-oidc-signed-in")
    finally:
        bob.close()

    # The owner keeps a password login while SSO is enforced (break-glass).
    page.context.clear_cookies()
    log_in(page, server, ANN.email, OWNER_PASSWORD)
    page.wait_for_url(re.compile(r"/emails"))


def test_a_team_signs_in_through_its_saml_idp(
    page: Page, start_dashboard: StartDashboard, idp: SamlIdp
) -> None:
    server = _start(start_dashboard, "", signup="invite_only")
    server.create_user(ANN.email, OWNER_PASSWORD, team="Corp")
    log_in(page, server, ANN.email, OWNER_PASSWORD)
    page.goto(server.url("/team/sso"))
    page.check("#protocol-saml")
    page.fill("#saml-metadata-url", f"{idp.url}/idp/metadata")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Single sign-on settings saved.")).to_be_visible()
    screenshot(page, "sso-team-saml-settings")
    sign_in_link = page.locator("code").first.inner_text()
    page.goto(server.url("/team"))
    page.fill("#invite-email", BOB.email)
    page.locator("#invite-form button[type=submit]").click()

    bob = page.context.browser.new_context()  # type: ignore[union-attr]
    try:
        tab = bob.new_page()
        tab.goto(sign_in_link)
        tab.fill('input[name="email"]', BOB.email)
        tab.get_by_role("button", name="Sign in").click()
        tab.get_by_role("button", name="Continue").click()
        tab.wait_for_url(re.compile(r"/emails"))
        expect(tab.locator(".user-email")).to_have_text(BOB.email)
        screenshot(tab, "sso-team-saml-signed-in")
    finally:
        bob.close()
