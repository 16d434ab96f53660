"""Sign-in with Google, GitHub and a team's own provider, in chromium against one live server:
Google, GitHub and a team's OpenID Connect provider through a real provider on loopback
(oidc-provider-mock: authlib, RS256 ID tokens, its own authorization page, GitHub's user API
added), SAML 2.0 through a pysaml2 IdP on loopback. Screenshots of every page.

The server has open sign-up, so each test uses people of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import DashboardServer, free_port, log_in
from tests.dashboard.screenshots import screenshot
from tests.e2e.conftest import write_config
from tests.oidc_provider import Person, oidc_provider, register_client
from tests.saml_idp import SamlIdp, saml_idp

ANN = Person(sub="ann", email="ann@corp.example", name="Ann Lee")
BOB = Person(sub="bob", email="bob@roe.example", name="Bob Roe")
OLGA = Person(sub="olga", email="olga@corp.example", name="Olga Owner")
CARL = Person(sub="carl", email="carl@corp.example", name="Carl Member")
EVE = Person(sub="eve", email="eve@corp.example", name="Eve", email_verified=False)
IVY = Person(sub="ivy", email="ivy@invited.example", name="Ivy Invitee")
PEOPLE = (ANN, BOB, OLGA, CARL, EVE, IVY)
PASSWORD = "correct horse battery staple"


@dataclass
class Setup:
    server: DashboardServer
    issuer: str
    # The team OpenID Connect client registered with the provider for this server.
    team_client: tuple[str, str]


@pytest.fixture(scope="module")
def idp() -> Iterator[SamlIdp]:
    with saml_idp() as running:
        yield running


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with sso_server(tmp_path_factory.mktemp("sso"), PEOPLE) as running:
        yield running


@contextmanager
def sso_server(directory: Path, people: Sequence[Person]) -> Iterator[Setup]:
    """The provider with `people`, and a live server (open sign-up) signing in with Google and
    GitHub through it, with a team OpenID Connect client registered."""
    with oidc_provider(people) as issuer:
        port = free_port()
        base = f"http://localhost:{port}"
        github_id, github_secret = register_client(
            issuer, f"{base}/auth/callback/github", "read:user user:email"
        )
        team_client = register_client(issuer, f"{base}/auth/callback/oidc", "openid email profile")
        server = DashboardServer(
            config_path=directory / "postwire.toml", data_dir=directory / "data"
        )
        write_config(
            server.config_path,
            server.data_dir,
            dashboard_listen=f"127.0.0.1:{port}",
            dashboard_public_url=base,
            auth_signup="open",
            auth_extra=(
                f'google_client_id = "postwire-google"\ngoogle_client_secret = "s3cret"\n'
                f'google_issuer = "{issuer}"\n'
                f'github_client_id = "{github_id}"\ngithub_client_secret = "{github_secret}"\n'
                f'github_authorize_url = "{issuer}/oauth2/authorize"\n'
                f'github_token_url = "{issuer}/oauth2/token"\n'
                f'github_api_url = "{issuer}/github"\n'
                "allow_private_issuers = true"
            ),
        )
        server.start()
        try:
            yield Setup(server, issuer, team_client)
        finally:
            server.stop()


def authorize_as(page: Page, person: Person) -> None:
    """On the provider's authorization page, sign in as `person` (one button each)."""
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    page.get_by_role("button", name=person.sub, exact=True).click()


def refused(page: Page, words: str) -> None:
    expect(page.get_by_role("heading", name="Sign-in did not complete")).to_be_visible()
    expect(page.get_by_text(words)).to_be_visible()


def test_sign_in_with_google_makes_an_account_when_sign_up_is_open(
    page: Page, setup: Setup
) -> None:
    server = setup.server
    page.goto(server.url("/login?next=/metrics"))
    screenshot(page, "sso-login-page")
    page.get_by_role("link", name="Sign in with Google").click()
    screenshot(page, "sso-google-provider")
    authorize_as(page, ANN)
    page.wait_for_url(re.compile(r"/metrics"))
    expect(page.locator(".user-email")).to_have_text(ANN.email)
    screenshot(page, "sso-google-signed-in")

    # Signing in again finds the same account (linked by its verified address).
    page.context.clear_cookies()
    page.goto(server.url("/login"))
    page.get_by_role("link", name="Sign in with Google").click()
    authorize_as(page, ANN)
    page.wait_for_url(re.compile(r"/emails"))
    expect(page.locator(".team-name")).to_have_text("Ann Lee's team")


def test_an_unverified_address_is_refused_in_words(page: Page, setup: Setup) -> None:
    page.goto(setup.server.url("/login/google"))
    authorize_as(page, EVE)
    refused(page, "has not verified the address eve@corp.example")
    screenshot(page, "sso-refused-unverified")


def test_sign_in_with_github_links_the_existing_account(page: Page, setup: Setup) -> None:
    server = setup.server
    server.create_user(BOB.email, PASSWORD, team="Roe & Co")
    page.goto(server.url("/login"))
    page.get_by_role("link", name="Sign in with GitHub").click()
    authorize_as(page, BOB)
    page.wait_for_url(re.compile(r"/emails"))
    expect(page.locator(".user-email")).to_have_text(BOB.email)
    expect(page.locator(".team-name")).to_have_text("Roe & Co")
    screenshot(page, "sso-github-signed-in")


def test_sso_page_without_a_team_for_the_address(page: Page, setup: Setup) -> None:
    page.goto(setup.server.url("/login/sso"))
    screenshot(page, "sso-login-by-address")
    page.fill("#sso-email", "someone@nowhere.example")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_text("No team signs in with SSO for this address")).to_be_visible()
    page.fill("#sso-email", "no-such-team")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_text("No team signs in with SSO for this address")).to_be_visible()


def configure_team_oidc(page: Page, setup: Setup, *, enforce: bool) -> str:
    """As the signed-in owner, set the team's OpenID Connect provider to the test provider;
    returns the team's sign-in link."""
    client_id, secret = setup.team_client
    page.goto(setup.server.url("/team/sso"))
    page.check("#protocol-oidc")
    page.fill("#oidc-issuer", setup.issuer)
    page.fill("#oidc-client-id", client_id)
    page.fill("#oidc-client-secret", secret)
    if enforce:
        page.check("#enforce-sso")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Single sign-on settings saved.")).to_be_visible()
    return page.locator("code").first.inner_text()


def configure_team_saml(page: Page, server: DashboardServer, idp: SamlIdp) -> str:
    """As the signed-in owner, set the team's SAML IdP to the test IdP; returns the team's
    sign-in link."""
    page.goto(server.url("/team/sso"))
    page.check("#protocol-saml")
    page.fill("#saml-metadata-url", f"{idp.url}/idp/metadata")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Single sign-on settings saved.")).to_be_visible()
    return page.locator("code").first.inner_text()


def invite(page: Page, server: DashboardServer, email: str) -> None:
    page.goto(server.url("/team"))
    page.fill("#invite-email", email)
    page.locator("#invite-form button[type=submit]").click()
    expect(page.get_by_role("cell", name=email)).to_be_visible()


def test_an_invited_address_signing_in_with_google_joins_the_inviting_team(
    page: Page, browser: Browser, setup: Setup
) -> None:
    server = setup.server
    server.create_user("rita@invited.example", PASSWORD, team="Invites Inc")
    log_in(page, server, "rita@invited.example", PASSWORD)
    invite(page, server, IVY.email)
    ivy = browser.new_context()
    try:
        tab = ivy.new_page()
        tab.goto(server.url("/login/google"))
        authorize_as(tab, IVY)
        tab.wait_for_url(re.compile(r"/emails"))
        # The invitation's team, not one of her own.
        expect(tab.locator(".team-name")).to_have_text("Invites Inc")
    finally:
        ivy.close()


def test_a_team_signs_in_through_its_own_openid_connect_provider(
    page: Page, browser: Browser, setup: Setup
) -> None:
    server = setup.server
    server.create_user(OLGA.email, PASSWORD, team="Corp")
    log_in(page, server, OLGA.email, PASSWORD)
    sign_in_link = configure_team_oidc(page, setup, enforce=True)
    screenshot(page, "sso-team-settings")

    # Carl is invited as a member and has no password: the team's provider signs him in.
    invite(page, server, CARL.email)
    carl = browser.new_context()
    try:
        tab = carl.new_page()
        tab.goto(sign_in_link)
        authorize_as(tab, CARL)
        tab.wait_for_url(re.compile(r"/emails"))
        expect(tab.locator(".user-email")).to_have_text(CARL.email)
        expect(tab.locator(".team-name")).to_have_text("Corp")
        screenshot(tab, "sso-team-oidc-signed-in")
        # A member reads the team's settings; only owners get the form.
        tab.goto(server.url("/team/sso"))
        expect(tab.locator("#sso-summary")).to_contain_text("SSO is enforced")
        expect(tab.locator("#sso-settings")).to_have_count(0)
        screenshot(tab, "sso-team-settings-member")
        # Google does not sign in to his account: the team's provider asserted his address,
        # which no mail has confirmed (a tenant's provider vouches for its own team alone).
        tab.context.clear_cookies()
        tab.goto(server.url("/login/google"))
        authorize_as(tab, CARL)
        refused(tab, "its address was never confirmed")
        screenshot(tab, "sso-team-enforced")
    finally:
        carl.close()

    # The owner keeps a password login while SSO is enforced (break-glass).
    page.context.clear_cookies()
    log_in(page, server, OLGA.email, PASSWORD)
    page.wait_for_url(re.compile(r"/emails"))


def test_a_team_signs_in_through_its_saml_idp(
    page: Page, browser: Browser, setup: Setup, idp: SamlIdp
) -> None:
    server = setup.server
    owner, member = "sam@saml.example", "dina@saml.example"
    server.create_user(owner, PASSWORD, team="SamlCo")
    log_in(page, server, owner, PASSWORD)
    sign_in_link = configure_team_saml(page, server, idp)
    screenshot(page, "sso-team-saml-settings")
    invite(page, server, member)

    def sign_in(tab: Page) -> dict[str, str]:
        """Sign in by the team's ID on the SSO page (the link's last part); the IdP's answer
        as the browser posts it (its URL and SAMLResponse)."""
        tab.goto(server.url("/login/sso"))
        tab.fill("#sso-email", sign_in_link.rsplit("/", 1)[1])
        tab.get_by_role("button", name="Continue").click()
        tab.get_by_role("link", name="Continue to your identity provider").click()
        tab.fill('input[name="email"]', member)
        tab.get_by_role("button", name="Sign in").click()
        answer = {
            "url": tab.locator("form").get_attribute("action") or "",
            "SAMLResponse": tab.locator('input[name="SAMLResponse"]').get_attribute("value") or "",
        }
        tab.get_by_role("button", name="Continue").click()
        return answer

    dina = browser.new_context()
    try:
        tab = dina.new_page()
        answer = sign_in(tab)
        tab.wait_for_url(re.compile(r"/emails"))
        expect(tab.locator(".user-email")).to_have_text(member)
        expect(tab.locator(".team-name")).to_have_text("SamlCo")
        screenshot(tab, "sso-team-saml-signed-in")

        # The same signed answer posted again (a replay) is refused: its request was answered.
        replay = httpx.post(answer["url"], data={"SAMLResponse": answer["SAMLResponse"]})
        assert replay.status_code == 400
        assert "used already" in replay.text

        # An unsigned answer is refused, in words.
        tab.context.clear_cookies()
        idp.mode = "unsigned"
        sign_in(tab)
        refused(tab, "signature is missing or not valid")
        screenshot(tab, "sso-refused-saml-unsigned")
    finally:
        idp.mode = "valid"
        dina.close()
