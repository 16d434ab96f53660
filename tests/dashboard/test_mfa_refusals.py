"""What the MFA pages refuse, against a live server: a form without its CSRF token, the team's
MFA setting changed by anyone but an owner, a passkey sign-in finished from another browser
than the one that asked, a pending second step skipped by calling the passkey or code answers
directly. A member still manages their own devices."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Browser, Page

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_mfa import OWNER, PASSWORD, enrol_totp, log_out

MEMBER = "member@example.org"


def csrf_token(page: Page) -> str:
    token = page.get_attribute('input[name="csrf_token"]', "value")
    assert token
    return token


def test_team_setting_needs_an_owner_and_a_token(
    dashboard_server: DashboardServer, page: Page
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Acme")
    dashboard_server.create_user(MEMBER, PASSWORD, team="Acme")
    log_in(page, dashboard_server, OWNER, PASSWORD)

    # Without the token the form is refused and nothing changes.
    refused = page.request.post(
        dashboard_server.url("/team/mfa"), form={"require_mfa": "on"}, max_redirects=0
    )
    assert refused.status == 403
    page.goto(dashboard_server.url("/team/mfa"))
    assert not page.is_checked("#require-mfa")

    # The owner makes the second user a member (the Team page's form).
    page.goto(dashboard_server.url("/team"))
    member_id = page.get_attribute(f'tr[data-member="{MEMBER}"] select[name="role"]', "id")
    assert member_id is not None
    changed = page.request.post(
        dashboard_server.url(f"/team/members/{member_id.removeprefix('role-')}/role"),
        form={"csrf_token": csrf_token(page), "role": "member"},
        max_redirects=0,
    )
    assert changed.status == 303
    log_out(page)

    log_in(page, dashboard_server, MEMBER, PASSWORD)
    page.goto(dashboard_server.url("/team/mfa"))
    assert "Only an owner can change this." in page.content()
    assert page.locator("#require-mfa").count() == 0
    screenshot(page, "mfa-team-as-member")
    as_member = page.request.post(
        dashboard_server.url("/team/mfa"),
        form={"csrf_token": csrf_token(page), "require_mfa": "on"},
        max_redirects=0,
    )
    assert as_member.status == 403
    # A member adds their own authenticator (their forms need no admin).
    enrol_totp(page, dashboard_server)
    page.goto(dashboard_server.url("/team/mfa"))
    assert "A second factor is optional in this team." in page.content()


def test_second_step_cannot_be_skipped_or_finished_elsewhere(
    dashboard_server: DashboardServer, browser: Browser, page: Page
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Acme")
    log_in(page, dashboard_server, OWNER, PASSWORD)
    enrol_totp(page, dashboard_server)
    log_out(page)
    log_in(page, dashboard_server, OWNER, PASSWORD)
    assert urlsplit(page.url).path == "/login/mfa"
    token = csrf_token(page)

    # An empty or forged passkey answer does not complete the step.
    for credential in ("", '{"id": "AAAA", "type": "public-key"}'):
        answer = page.request.post(
            dashboard_server.url("/login/mfa/passkey"),
            form={"csrf_token": token, "credential": credential, "next": "/emails"},
            max_redirects=0,
        )
        assert answer.status == 303
        assert urlsplit(answer.headers["location"]).path == "/login/mfa"
    # No passkey here: asking for passkey options is refused plainly.
    options = page.request.post(
        dashboard_server.url("/login/mfa/passkey/options"), headers={"X-CSRF-Token": token}
    )
    assert options.status == 400 and "no passkey" in options.text()
    page.goto(dashboard_server.url("/api-keys"))
    assert urlsplit(page.url).path == "/login/mfa"

    # Without JavaScript the passkey button is not offered (it could do nothing).
    without_js = browser.new_context(java_script_enabled=False)
    try:
        plain = without_js.new_page()
        plain.goto(dashboard_server.url("/login"))
        assert plain.locator("#passkey-login").count() == 1
        assert not plain.is_visible("#passkey-login")
    finally:
        without_js.close()

    # A sign-in challenge asked for by one browser cannot be answered from another.
    page.goto(dashboard_server.url("/login"))
    assert page.is_visible("#passkey-login")
    other = browser.new_context()
    try:
        stranger = other.new_page()
        stranger.goto(dashboard_server.url("/login"))
        stranger_token = csrf_token(stranger)
        asked = stranger.request.post(
            dashboard_server.url("/login/passkey/options"),
            headers={"X-CSRF-Token": stranger_token},
        )
        assert asked.status == 200 and asked.json()["challenge"]
        answer = page.request.post(
            dashboard_server.url("/login/passkey"),
            form={"csrf_token": csrf_token(page), "credential": '{"id": "AAAA"}'},
            max_redirects=0,
        )
        assert answer.status == 303
        assert urlsplit(answer.headers["location"]).path == "/login"
    finally:
        other.close()
