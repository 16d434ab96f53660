"""Pre-account takeover, in chromium against a live server with open sign-up: an attacker signs
up with the victim's address, enrols an authenticator app and keeps a session in their own
team; the victim then proves the address by a mailed link (a password reset, or the sign-up's
confirmation link opened without that account's session). The account is started afresh: the
attacker's session, password and second factor reach nothing, and the victim does not see the
attacker's team. A person who signs up and confirms in the browser signed in to the account
keeps their team.

The tests share one server, each with addresses and teams of its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_mfa import enrol_totp, path_of
from tests.dashboard.test_people import _link as logged_link
from tests.dashboard.test_people import _new_page as new_tab

ATTACKERS_PASSWORD = "the attacker's own passphrase"
VICTIMS_PASSWORD = "the victim's chosen passphrase"


@dataclass(frozen=True)
class Squat:
    """The victim's address the attacker signed up with, and the team the attacker made."""

    victim: str
    team: str


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    """One server with open sign-up for the module's tests."""
    with running_dashboard(tmp_path_factory.mktemp("takeover"), auth_signup="open") as server:
        yield server


def _sign_up(page: Page, server: DashboardServer, email: str, password: str, team: str) -> None:
    page.goto(server.url("/signup"))
    page.fill('input[name="name"]', "Someone")
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.fill('input[name="team"]', team)
    page.locator("form button[type=submit]").click()
    page.wait_for_url(re.compile(r"/emails"))


def _squatted(server: DashboardServer, squat: Squat, attacker: Page, browser: Browser) -> Page:
    """The attacker (in `attacker`) signed up with the victim's address and enrolled an
    authenticator app of theirs; a tab of the victim's."""
    _sign_up(attacker, server, squat.victim, ATTACKERS_PASSWORD, squat.team)
    enrol_totp(attacker, server)
    return new_tab(browser)


def _choose_password(tab: Page) -> None:
    tab.fill("#reset-password", VICTIMS_PASSWORD)
    tab.fill("#reset-password-confirm", VICTIMS_PASSWORD)
    tab.locator("form.stacked button[type=submit]").click()
    tab.wait_for_url(re.compile(r"/login"))


def _told_what_was_reset(tab: Page, squat: Squat) -> None:
    notice = tab.locator(".flash-warning")
    expect(notice).to_contain_text("never been confirmed")
    expect(notice).to_contain_text("1 authenticator app removed")
    expect(notice).to_contain_text(f"left the team “{squat.team}”")


def _the_attacker_is_out(attacker: Page, server: DashboardServer, squat: Squat) -> None:
    attacker.goto(server.url("/emails"))
    assert path_of(attacker) == "/login"  # their session ended
    log_in(attacker, server, squat.victim, ATTACKERS_PASSWORD)
    assert path_of(attacker) == "/login"  # their password is gone
    expect(attacker.locator(".flash-error, [role=alert]").first).to_be_visible()


def _the_victim_has_a_fresh_account(victim: Page, server: DashboardServer, squat: Squat) -> None:
    log_in(victim, server, squat.victim, VICTIMS_PASSWORD)
    # Straight in: the attacker's authenticator app asks for no code any more.
    assert path_of(victim) == "/emails", victim.url
    for path in ("/emails", "/team", "/account", "/account/mfa"):
        victim.goto(server.url(path))
        assert squat.team not in victim.content(), path
    expect(victim.locator("#verify-banner")).to_have_count(0)
    victim.goto(server.url("/account/mfa"))
    assert "Work phone" not in victim.content()


def test_a_password_reset_starts_a_squatted_account_afresh(
    open_server: DashboardServer, page: Page, browser: Browser
) -> None:
    server, squat = open_server, Squat("victim@reset.mailbox.example", "Squat Team")
    victim = _squatted(server, squat, page, browser)
    victim.goto(server.url("/password/forgot"))
    victim.fill("#forgot-email", squat.victim)
    victim.locator("form.stacked button[type=submit]").click()
    victim.goto(logged_link(server, "password reset", squat.victim))
    expect(victim.locator("#password-afresh")).to_contain_text("starts it afresh")
    screenshot(victim, "people-password-reset-afresh")
    _choose_password(victim)
    _told_what_was_reset(victim, squat)

    _the_attacker_is_out(page, server, squat)
    _the_victim_has_a_fresh_account(victim, server, squat)


def test_the_confirmation_link_opened_without_the_accounts_session_starts_it_afresh(
    open_server: DashboardServer, page: Page, browser: Browser
) -> None:
    server, squat = open_server, Squat("victim@confirm.mailbox.example", "Confirmed Squat")
    victim = _squatted(server, squat, page, browser)
    # The sign-up's confirmation link reached the victim's mailbox, not the attacker's.
    victim.goto(logged_link(server, "address verification", squat.victim))
    expect(victim.locator("#verify-afresh")).to_contain_text("starts the account afresh")
    screenshot(victim, "people-verify-afresh")
    victim.get_by_role("button", name="Confirm").click()
    victim.wait_for_url(re.compile(r"/password/set/"))
    expect(victim.locator(".flash-success")).to_contain_text(f"{squat.victim} is confirmed")
    _told_what_was_reset(victim, squat)
    _choose_password(victim)

    _the_attacker_is_out(page, server, squat)
    _the_victim_has_a_fresh_account(victim, server, squat)


def test_confirming_in_the_browser_signed_in_to_the_account_keeps_its_team(
    open_server: DashboardServer, page: Page
) -> None:
    server = open_server
    honest, team = "honest@mailbox.example", "Honest Co"
    _sign_up(page, server, honest, VICTIMS_PASSWORD, team)
    page.goto(logged_link(server, "address verification", honest))
    expect(page.locator("#verify-afresh")).to_have_count(0)
    page.get_by_role("button", name="Confirm").click()
    page.wait_for_url(re.compile(r"/account"))
    expect(page.locator(".flash-success")).to_contain_text(f"{honest} is confirmed")
    expect(page.locator(".flash-warning")).to_have_count(0)
    expect(page.locator(".team-name")).to_have_text(team)
    page.goto(server.url("/emails"))
    assert path_of(page) == "/emails"
