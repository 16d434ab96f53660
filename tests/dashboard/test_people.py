"""People in a browser: an owner invites someone, who accepts by the link (taken from the
server's log: no `auth.mail_from`), signs in and sees the team; roles change; a member is
refused what admins may do; a forgotten password is reset by its link; an address is confirmed;
other sessions are logged out; with `auth.mail_from` under a verified domain the invitation
arrives by mail, DKIM-signed. Every page of the area is saved as a screenshot.

The tests share one server (invitation-only, links in its log), each with people and a team of
its own; open sign-up and `auth.mail_from` have servers of their own."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from email import message_from_bytes
from email.policy import default
from urllib.parse import urlsplit

import pytest
import resend
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import PAGE_TIMEOUT_MS, DashboardServer, StartDashboard, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    _clean_env,
    dkim_verifies,
    verified_domain,
    wait_until,
)
from tests.smtp_receiver import ScriptedSmtpReceiver

OWNER = "owner@example.org"
PASSWORD = "correct horse battery staple 42"
INVITED = "bo@example.net"
INVITED_PASSWORD = "bo's own long passphrase"


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    """One server for the module's tests: each has people and a team of its own."""
    with running_dashboard(tmp_path_factory.mktemp("people")) as server:
        yield server


def _link(server: DashboardServer, what: str, address: str) -> str:
    """The last link of kind `what` the server logged for `address`."""
    pattern = re.compile(rf"{what} link for {re.escape(address)}: (\S+)")
    server.wait_for_log(pattern, what=f"{what} link for {address}")
    links: list[str] = pattern.findall(server.log_text())
    return links[-1]


def _path(page: Page) -> str:
    return urlsplit(page.url).path


def _new_page(browser: Browser) -> Page:
    profile = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    profile.set_default_timeout(PAGE_TIMEOUT_MS)
    return profile.new_page()


def test_an_invited_person_joins_changes_role_and_is_refused_what_admins_do(
    dashboard_server: DashboardServer, page: Page, browser: Browser
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Acme")
    log_in(page, dashboard_server, OWNER, PASSWORD)
    page.goto(dashboard_server.url("/team"))
    expect(page.locator("h1")).to_have_text("Acme")
    page.fill("#invite-email", INVITED)
    page.select_option("#invite-role", "admin")
    page.click("#invite-form button[type=submit]")
    # No mail_from: the page shows the link to pass on, as the log has it.
    expect(page.locator("#invitation-link")).to_contain_text(f"Give this link to {INVITED}")
    expect(page.locator(f'#invitations tr[data-invitation="{INVITED}"]')).to_contain_text("admin")
    screenshot(page, "people-team-owner")

    link = _link(dashboard_server, "invitation", INVITED)
    assert page.locator("#invitation-url").inner_text() == link
    assert link.startswith(dashboard_server.dashboard_url + "/invite/")
    invited = _new_page(browser)
    invited.goto(link)
    expect(invited.locator("h1")).to_have_text("Join Acme")
    screenshot(invited, "people-invitation")
    invited.fill("#invite-name", "Bo")
    invited.fill("#invite-password", INVITED_PASSWORD)
    invited.fill("#invite-password-confirm", INVITED_PASSWORD)
    invited.click("form.stacked button[type=submit]")
    invited.wait_for_load_state()
    assert _path(invited) == "/emails", invited.content()
    invited.goto(dashboard_server.url("/team"))
    expect(invited.locator(f'#members tr[data-member="{INVITED}"]')).to_contain_text("admin")
    expect(invited.locator(f'#members tr[data-member="{OWNER}"]')).to_contain_text("owner")
    screenshot(invited, "people-team-admin")

    # The link is spent: opened again, it says so in plain words.
    again = invited.goto(link)
    assert again is not None and again.status == 410
    expect(invited.locator(".flash-error")).to_contain_text("does not work")

    # The owner makes Bo a member; the pending invitation is gone.
    page.goto(dashboard_server.url("/team"))
    expect(page.locator("#invitations")).to_have_count(0)
    row = page.locator(f'#members tr[data-member="{INVITED}"]')
    row.locator("select").select_option("member")
    row.locator("button", has_text="Change role").click()
    expect(page.locator(".flash-success")).to_contain_text(f"{INVITED} is now member")
    expect(row).to_contain_text("member")

    # The last owner can be neither demoted nor leave.
    own_row = page.locator(f'#members tr[data-member="{OWNER}"]')
    own_row.locator("select").select_option("admin")
    own_row.locator("button", has_text="Change role").click()
    expect(page.locator(".flash-error")).to_contain_text("last owner")

    # A member sees no invitation form, and sending one anyway is refused with a 403 page.
    invited.goto(dashboard_server.url("/team"))
    expect(invited.locator("#invite-form")).to_have_count(0)
    csrf = invited.locator('input[name="csrf_token"]').first.get_attribute("value")
    assert csrf
    with invited.expect_navigation() as refused:
        invited.evaluate(
            """([csrf, email]) => {
            const form = document.createElement("form");
            form.method = "post";
            form.action = "/team/invitations";
            for (const [name, value] of [["csrf_token", csrf], ["email", email]]) {
                const input = document.createElement("input");
                input.name = name;
                input.value = value;
                form.appendChild(input);
            }
            document.body.appendChild(form);
            form.submit();
        }""",
            [csrf, "cy@example.net"],
        )
    response = refused.value
    assert response is not None and response.status == 403
    expect(invited.locator("body")).to_contain_text("does not allow")
    screenshot(invited, "people-member-refused")
    assert "invitation link for cy@example.net" not in dashboard_server.log_text()

    # The owner invites Cy, then revokes it: the link stops working.
    page.goto(dashboard_server.url("/team"))
    page.fill("#invite-email", "cy@example.net")
    page.click("#invite-form button[type=submit]")
    cy_link = _link(dashboard_server, "invitation", "cy@example.net")
    page.locator('#invitations tr[data-invitation="cy@example.net"] button').click()
    expect(page.locator(".flash-success")).to_contain_text("cy@example.net was revoked")
    revoked = invited.goto(cy_link)
    assert revoked is not None and revoked.status == 410

    # The owner removes Bo, whose next page is the sign-in form (Bo has no other team).
    page.locator(f'#members tr[data-member="{INVITED}"] button', has_text="Remove").click()
    expect(page.locator(".flash-success")).to_contain_text(f"{INVITED} was removed")
    expect(page.locator(f'#members tr[data-member="{INVITED}"]')).to_have_count(0)
    invited.goto(dashboard_server.url("/team"))
    assert _path(invited) == "/login"


def test_an_existing_account_signs_in_from_the_invitation_and_joins(
    dashboard_server: DashboardServer, page: Page, browser: Browser
) -> None:
    owner, joining, team = "owner@joining.example.org", "bo@joining.example.net", "Beacon"
    dashboard_server.create_user(owner, PASSWORD, team=team)
    dashboard_server.create_user(joining, INVITED_PASSWORD, team="Bo's team")
    log_in(page, dashboard_server, owner, PASSWORD)
    page.goto(dashboard_server.url("/team"))
    page.fill("#invite-email", joining)
    page.click("#invite-form button[type=submit]")
    link = _link(dashboard_server, "invitation", joining)

    # Signed in as someone else, the link is not theirs to accept.
    page.goto(link)
    expect(page.locator(".card")).to_contain_text(f"You are signed in as {owner}")
    expect(page.locator(f"text=Join {team}")).to_have_count(1)  # the title, no button

    invited = _new_page(browser)
    invited.goto(link)
    invited.click("a.button:has-text('Sign in to accept')")
    invited.fill('input[name="email"]', joining)
    invited.fill('input[name="password"]', INVITED_PASSWORD)
    invited.click('form button[type="submit"]')
    invited.wait_for_load_state()
    assert _path(invited).startswith("/invite/"), invited.content()
    invited.click("form.stacked button[type=submit]")
    invited.wait_for_load_state()
    assert _path(invited) == "/team"
    expect(invited.locator(".flash-success")).to_contain_text(f"You joined {team}")
    expect(invited.locator("h1")).to_have_text(team)
    expect(invited.locator(f'#members tr[data-member="{joining}"]')).to_contain_text("member")
    expect(invited.locator("#team-switch-select option")).to_have_count(2)


def test_a_forgotten_password_is_reset_by_its_link(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "owner@resets.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Resets")
    page.goto(dashboard_server.url("/login"))
    page.click("text=Forgot your password?")
    screenshot(page, "people-password-forgot")
    answers = []
    for address in ("nobody@example.org", owner):
        page.goto(dashboard_server.url("/password/forgot"))
        page.fill("#forgot-email", address)
        page.click("form.stacked button[type=submit]")
        answers.append(page.locator("#forgot-answer").inner_text())
    assert answers[0] == answers[1]  # the same words, account or not
    screenshot(page, "people-password-forgot-sent")

    link = _link(dashboard_server, "password reset", owner)
    assert "link for nobody@example.org" not in dashboard_server.log_text()
    page.goto(link)
    screenshot(page, "people-password-reset")
    new_password = "a brand new passphrase 7"
    page.fill("#reset-password", new_password)
    page.fill("#reset-password-confirm", "not the same passphrase")
    page.click("form.stacked button[type=submit]")
    expect(page.locator(".flash-error")).to_contain_text("differ")
    page.fill("#reset-password", new_password)
    page.fill("#reset-password-confirm", new_password)
    page.click("form.stacked button[type=submit]")
    page.wait_for_load_state()
    assert _path(page) == "/login"

    log_in(page, dashboard_server, owner, PASSWORD)
    assert _path(page) == "/login"  # the old password no longer works
    log_in(page, dashboard_server, owner, new_password)
    assert _path(page) == "/emails", page.content()
    assert page.goto(link) is not None
    expect(page.locator(".flash-error")).to_contain_text("does not work")


def test_log_out_other_sessions(
    dashboard_server: DashboardServer, page: Page, browser: Browser
) -> None:
    owner = "owner@sessions.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Sessions")
    elsewhere = _new_page(browser)
    log_in(elsewhere, dashboard_server, owner, PASSWORD)
    log_in(page, dashboard_server, owner, PASSWORD)
    page.goto(dashboard_server.url("/account"))
    expect(page.locator("#sessions tbody tr")).to_have_count(2)
    expect(page.locator("#account-email")).to_have_text(owner)
    screenshot(page, "people-account")
    page.click("text=Log out other sessions")
    expect(page.locator(".flash-success")).to_contain_text("1 other session signed out")
    expect(page.locator("#sessions tbody tr")).to_have_count(1)

    elsewhere.goto(dashboard_server.url("/emails"))
    assert _path(elsewhere) == "/login"
    page.goto(dashboard_server.url("/emails"))
    assert _path(page) == "/emails"


def test_a_signed_up_address_is_confirmed_by_its_link(
    start_dashboard: StartDashboard, page: Page
) -> None:
    server = start_dashboard(auth_signup="open")
    page.goto(server.url("/signup"))
    page.fill('input[name="name"]', "Di")
    page.fill('input[name="email"]', "di@example.net")
    page.fill('input[name="password"]', PASSWORD)
    if page.locator('input[name="team"]').count():
        page.fill('input[name="team"]', "Di's team")
    page.click('form button[type="submit"]')
    page.wait_for_load_state()
    page.goto(server.url("/emails"))
    expect(page.locator("#unconfirmed-banner")).to_contain_text("di@example.net")
    page.goto(server.url("/account"))
    expect(page.locator("#verify-banner")).to_be_visible()
    page.goto(server.url("/team"))
    page.fill("#invite-email", "someone@example.net")
    page.click("#invite-form button[type=submit]")
    expect(page.locator(".flash-error")).to_contain_text("Confirm your own address")

    link = _link(server, "address verification", "di@example.net")
    page.goto(link)
    screenshot(page, "people-verify")
    page.click("form.stacked button[type=submit]")
    page.wait_for_load_state()
    assert _path(page) == "/account"
    expect(page.locator(".flash-success")).to_contain_text("di@example.net is confirmed")
    expect(page.locator("#verify-banner")).to_have_count(0)
    page.goto(server.url("/emails"))
    expect(page.locator("#unconfirmed-banner")).to_have_count(0)


def verify_mail_domain(server: DashboardServer, dns_server: AuthoritativeDnsServer) -> None:
    """Verify DOMAIN, where `auth.mail_from` is, through the API as the team of a new key."""
    resend.api_url = server.base_url
    resend.api_key = server.create_key("admin")
    try:
        verified_domain(dns_server, DOMAIN)
    finally:
        resend.api_key = None


def test_with_mail_from_the_invitation_is_mailed_signed(
    start_dashboard: StartDashboard,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    page: Page,
    browser: Browser,
) -> None:
    server = start_dashboard(auth_extra=f'mail_from = "Postwire <accounts@{DOMAIN}>"')
    verify_mail_domain(server, dns_server)
    server.create_user(OWNER, PASSWORD, team="Acme")
    log_in(page, server, OWNER, PASSWORD)
    page.goto(server.url("/team"))
    page.fill("#invite-email", INVITED)
    page.click("#invite-form button[type=submit]")
    expect(page.locator(".flash-success")).to_contain_text(f"sent to {INVITED}")

    wait_until(lambda: bool(smtp_receiver.received()), "the invitation to arrive")
    (received,) = smtp_receiver.received()
    assert received.rcpt_tos == [INVITED]
    assert dkim_verifies(received.content, dns_server)
    message = message_from_bytes(received.content, policy=default)
    assert message["From"] == f"Postwire <accounts@{DOMAIN}>"
    assert message["Subject"] == "Invitation to a team on Postwire"
    text = message.get_body(("plain",))
    assert text is not None
    match = re.search(r"(http://\S+/invite/\S+)", text.get_content())
    assert match, text.get_content()
    assert "invitation link for" not in server.log_text()  # mailed, not logged

    invited = _new_page(browser)
    invited.goto(match.group(1))
    expect(invited.locator("h1")).to_have_text("Join Acme")


def test_an_owner_made_without_a_password_sets_it_by_the_printed_link(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "owner@printed-link.example.org"
    command = [sys.executable, "-m", "postwire", "users", "create", "--email", owner]
    command += ["--team", "Printed link", "--config", str(dashboard_server.config_path)]
    result = subprocess.run(command, capture_output=True, text=True, env=_clean_env())
    assert result.returncode == 0, result.stderr
    link = result.stdout.strip()
    assert link.startswith(dashboard_server.dashboard_url + "/password/set/"), result.stdout

    page.goto(link)
    expect(page.locator("h1")).to_have_text("Choose your password")
    screenshot(page, "people-password-set")
    page.fill("#reset-password", PASSWORD)
    page.fill("#reset-password-confirm", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_load_state()
    assert _path(page) == "/login"
    log_in(page, dashboard_server, owner, PASSWORD)
    assert _path(page) == "/emails", page.content()
