"""A provider vouches only for what it may: attacks by a hostile team owner and by a sign-up
squatting an address, in chromium against one live server (open sign-up), a real OpenID
Connect provider and a pysaml2 IdP on loopback.

- A team's own provider (OpenID Connect or SAML) asserting the verified address of someone
  else's existing account signs nobody in, even once that person joined the team; the
  account's owner links the team's provider (signed in, from the Account page, or with the
  account's password at that sign-in), and its sessions then show that team alone, pass no
  other team's "enforce SSO" and change nothing of how the account signs in.
- An open sign-up with someone's address is not adopted when GitHub later vouches for it.
- `POST /account/email` to an address nobody confirmed changes nothing until its link is
  opened.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import PAGE_TIMEOUT_MS, log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_people import _link as logged_link
from tests.dashboard.test_sso import (
    Setup,
    authorize_as,
    configure_team_oidc,
    configure_team_saml,
    invite,
    refused,
    sso_server,
)
from tests.oidc_provider import Person
from tests.saml_idp import SamlIdp, saml_idp

PASSWORD = "correct horse battery staple"
VICTIM = "victim@other.example"
# The hostile owner's provider, asserting the victim's address (verified) under a subject of
# the owner's choosing.
FORGED_VICTIM = Person(sub="forged-victim", email=VICTIM, name="Not The Victim")
# The victim's own identity at the team's provider, which they link themselves.
VICTIM_AT_TEAM = Person(sub="victim-at-work", email=VICTIM, name="The Victim")
NEWCOMER = Person(sub="newcomer", email="newcomer@fresh.example", name="New Comer")
SQUATTED = Person(sub="squatted", email="gina@squatted.example", name="Gina")
PEOPLE = (FORGED_VICTIM, VICTIM_AT_TEAM, NEWCOMER, SQUATTED)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with sso_server(tmp_path_factory.mktemp("sso-binding"), PEOPLE) as running:
        yield running


@pytest.fixture(scope="module")
def idp() -> Iterator[SamlIdp]:
    with saml_idp() as running:
        yield running


def _new_tab(browser: Browser) -> Page:
    profile = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    profile.set_default_timeout(PAGE_TIMEOUT_MS)
    return profile.new_page()


def _signed_out(tab: Page, setup: Setup) -> None:
    tab.goto(setup.server.url("/emails"))
    expect(tab).to_have_url(re.compile(r"/login\?next="))


def _asked_for_the_accounts_password(tab: Page, setup: Setup) -> None:
    """The team's provider named an unlinked account: the page asks for its password, and a
    wrong one links nothing and signs nobody in."""
    expect(tab.get_by_role("heading", name="Link your account")).to_be_visible()
    expect(tab.locator("#sso-link-why")).to_contain_text("never linked to it")
    tab.fill("#sso-link-password", "a guess at the victim's password")
    tab.get_by_role("button", name="Link and sign in").click()
    refused(tab, "The password is not right")
    _signed_out(tab, setup)


def _join_by_invitation(tab: Page, setup: Setup, email: str) -> None:
    """Signed in as `email` in `tab`, accept the last invitation logged for the address."""
    tab.goto(logged_link(setup.server, "invitation", email))
    tab.locator("form.stacked button[type=submit]").click()
    expect(tab.locator(".flash-success")).to_contain_text("You joined")


def test_a_teams_openid_connect_provider_opens_no_account_it_was_not_linked_to(
    page: Page, browser: Browser, setup: Setup
) -> None:
    server = setup.server
    server.create_user(VICTIM, PASSWORD, team="Victim Co")
    server.create_user("mallory@evil.example", PASSWORD, team="Evil Co")
    log_in(page, server, "mallory@evil.example", PASSWORD)
    sign_in_link = configure_team_oidc(page, setup, enforce=False)
    invite(page, server, VICTIM)

    # The owner signs in through "their" provider as the victim: refused, nobody signed in.
    attacker = _new_tab(browser)
    attacker.goto(sign_in_link)
    authorize_as(attacker, FORGED_VICTIM)
    screenshot(attacker, "sso-link-asks-password")
    _asked_for_the_accounts_password(attacker, setup)

    # The victim joins the team with their password: still no way in for the owner's provider.
    victim = _new_tab(browser)
    log_in(victim, server, VICTIM, PASSWORD)
    _join_by_invitation(victim, setup, VICTIM)
    attacker.goto(sign_in_link)
    authorize_as(attacker, FORGED_VICTIM)
    _asked_for_the_accounts_password(attacker, setup)

    # The victim links their own identity at the team's provider from the Account page.
    victim.goto(server.url("/account"))
    screenshot(victim, "sso-account-link")
    victim.get_by_role("button", name="Link Evil Co's single sign-on").click()
    screenshot(victim, "sso-account-link-continue")
    victim.get_by_role("link", name="Continue to your identity provider").click()
    authorize_as(victim, VICTIM_AT_TEAM)
    expect(victim.locator(".flash-success")).to_contain_text("linked to Evil Co's single sign-on")
    expect(victim.locator("#sso-links")).to_contain_text(VICTIM)
    screenshot(victim, "sso-account-linked")

    # That identity now signs in, to that team alone: the victim's own team is not reachable.
    fresh = _new_tab(browser)
    fresh.goto(sign_in_link)
    authorize_as(fresh, VICTIM_AT_TEAM)
    fresh.wait_for_url(re.compile(r"/emails"))
    expect(fresh.locator(".user-email")).to_have_text(VICTIM)
    expect(fresh.locator(".team-name")).to_have_text("Evil Co")
    expect(fresh.locator("#team-switch-select")).to_have_count(0)  # one team: no team menu
    victim_team = victim.locator("#team-switch-select option", has_text="Victim Co")
    csrf = fresh.locator('input[name="csrf_token"]').first.get_attribute("value") or ""
    switched = fresh.request.post(
        server.url("/team/switch"),
        form={"csrf_token": csrf, "team_id": victim_team.get_attribute("value") or ""},
    )
    assert switched.ok
    fresh.goto(server.url("/account"))
    expect(fresh.locator(".team-name")).to_have_text("Evil Co")
    expect(fresh.get_by_text("Victim Co")).to_have_count(0)

    # The owner's forged subject is still refused: the link is the victim's identity only.
    attacker.goto(sign_in_link)
    authorize_as(attacker, FORGED_VICTIM)
    _asked_for_the_accounts_password(attacker, setup)
    for tab in (attacker, victim, fresh):
        tab.context.close()


def test_a_session_through_one_teams_sso_does_not_pass_another_teams_enforce_sso(
    page: Page, browser: Browser, setup: Setup
) -> None:
    server = setup.server
    server.create_user("una@enforcing.example", PASSWORD, team="Enforcing Co")
    server.create_user("tom@open.example", PASSWORD, team="Open Co")
    log_in(page, server, "una@enforcing.example", PASSWORD)
    enforcing_team_id = configure_team_oidc(page, setup, enforce=True).rsplit("/", 1)[1]
    owner_of_open = _new_tab(browser)
    log_in(owner_of_open, server, "tom@open.example", PASSWORD)
    open_link = configure_team_oidc(owner_of_open, setup, enforce=False)
    invite(owner_of_open, server, NEWCOMER.email)
    owner_of_open.context.close()

    # A new address invited by Open Co gets an account there, a member of Open Co only; its
    # address was asserted by a tenant's provider, never confirmed by mail.
    newcomer = _new_tab(browser)
    newcomer.goto(open_link)
    authorize_as(newcomer, NEWCOMER)
    newcomer.wait_for_url(re.compile(r"/emails"))
    expect(newcomer.locator(".team-name")).to_have_text("Open Co")
    newcomer.goto(server.url("/account"))
    expect(newcomer.locator("#verify-banner")).to_be_visible()

    # Invited to Enforcing Co too, they join it; the session Open Co's provider started does
    # not pass Enforcing Co's "enforce SSO".
    invite(page, server, NEWCOMER.email)
    _join_by_invitation(newcomer, setup, NEWCOMER.email)
    csrf = newcomer.locator('input[name="csrf_token"]').first.get_attribute("value") or ""
    newcomer.request.post(
        server.url("/team/switch"), form={"csrf_token": csrf, "team_id": enforcing_team_id}
    )
    newcomer.goto(server.url("/emails"))
    expect(newcomer.locator(".team-name")).to_have_text("Open Co")
    # Nor does it change how the account signs in: that needs another way in than a team's.
    newcomer.goto(server.url("/account"))
    newcomer.locator("#password-form input[name=password]").fill(PASSWORD)
    newcomer.locator("#password-form input[name=password_confirm]").fill(PASSWORD)
    newcomer.locator("#password-form button[type=submit]").click()
    expect(newcomer.get_by_text("speaks for that team only")).to_be_visible()
    screenshot(newcomer, "sso-session-cannot-change-sign-in")
    newcomer.context.close()


def test_a_teams_saml_idp_opens_no_account_it_was_not_linked_to(
    page: Page, browser: Browser, setup: Setup, idp: SamlIdp
) -> None:
    server = setup.server
    target = "vera@other.example"
    server.create_user(target, PASSWORD, team="Vera Co")
    server.create_user("sal@evil.example", PASSWORD, team="Evil SAML")
    log_in(page, server, "sal@evil.example", PASSWORD)
    sign_in_link = configure_team_saml(page, server, idp)
    invite(page, server, target)

    def through_the_idp(tab: Page) -> None:
        tab.goto(sign_in_link)
        tab.fill('input[name="email"]', target)
        tab.get_by_role("button", name="Sign in").click()
        tab.get_by_role("button", name="Continue").click()

    attacker = _new_tab(browser)
    through_the_idp(attacker)
    _asked_for_the_accounts_password(attacker, setup)

    # The account's owner, at the same sign-in, links it with the account's password; the
    # session shows the inviting team alone.
    victim = _new_tab(browser)
    through_the_idp(victim)
    victim.fill("#sso-link-password", PASSWORD)
    victim.get_by_role("button", name="Link and sign in").click()
    victim.wait_for_url(re.compile(r"/emails"))
    expect(victim.locator(".user-email")).to_have_text(target)
    expect(victim.locator(".team-name")).to_have_text("Evil SAML")
    expect(victim.locator("#team-switch-select")).to_have_count(0)
    screenshot(victim, "sso-linked-by-password")
    # From now on the IdP's NameID opens the account, for that team only.
    attacker.context.clear_cookies()
    through_the_idp(attacker)
    attacker.wait_for_url(re.compile(r"/emails"))
    expect(attacker.locator(".team-name")).to_have_text("Evil SAML")
    expect(attacker.locator("#team-switch-select")).to_have_count(0)
    for tab in (attacker, victim):
        tab.context.close()


def test_github_does_not_adopt_an_account_whose_address_was_never_confirmed(
    page: Page, browser: Browser, setup: Setup
) -> None:
    server = setup.server
    # The attacker signs up with the victim's address and a password of their own.
    page.goto(server.url("/signup"))
    page.fill('input[name="name"]', "Squatter")
    page.fill('input[name="email"]', SQUATTED.email)
    page.fill('input[name="password"]', PASSWORD)
    page.fill('input[name="team"]', "Squat Team")
    page.locator("form button[type=submit]").click()
    page.wait_for_url(re.compile(r"/emails"))

    # The victim signs in with GitHub, which vouches for the address: refused, in words.
    victim = _new_tab(browser)
    victim.goto(server.url("/login"))
    victim.get_by_role("link", name="Sign in with GitHub").click()
    authorize_as(victim, SQUATTED)
    refused(victim, "its address was never confirmed")
    screenshot(victim, "sso-refused-unconfirmed-account")
    _signed_out(victim, setup)
    victim.context.close()
    # The squatter's account is as it was: its own team, nothing of the victim's.
    page.goto(server.url("/account"))
    expect(page.locator("#verify-banner")).to_be_visible()


def test_changing_the_address_waits_for_the_new_one_to_be_confirmed(
    page: Page, browser: Browser, setup: Setup
) -> None:
    server = setup.server
    owner, wanted = "ora@owner.example", "someone-else@victim.example"
    server.create_user(owner, PASSWORD, team="Ora Co")
    log_in(page, server, owner, PASSWORD)
    page.goto(server.url("/account"))
    page.locator("summary", has_text="Change address").click()
    page.fill("#new-email", wanted)
    page.fill("#email-current-password", PASSWORD)
    page.get_by_role("button", name="Change address").click()
    expect(page.locator(".flash-success")).to_contain_text(f"Until then it stays {owner}")
    expect(page.locator("#account-email")).to_have_text(owner)
    expect(page.locator("#pending-email")).to_contain_text(wanted)

    # Nothing moved: the old address still signs in, the new one is nobody's.
    other = _new_tab(browser)
    log_in(other, server, wanted, PASSWORD)
    expect(other).to_have_url(re.compile(r"/login"))
    log_in(other, server, owner, PASSWORD)
    other.wait_for_url(re.compile(r"/emails"))
    other.context.close()

    # The link mailed to the new address moves the account, confirmed.
    page.goto(logged_link(server, "address verification", wanted))
    page.get_by_role("button", name="Confirm").click()
    page.goto(server.url("/account"))
    expect(page.locator("#account-email")).to_have_text(wanted)
    expect(page.locator("#verify-banner")).to_have_count(0)
