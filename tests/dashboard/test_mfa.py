"""MFA in a real browser against a live server: enrol an authenticator app from the page (the
secret read off the page, codes computed with pyotp), sign in with password and code, recovery
codes that work once, passkeys registered and used through Chromium's virtual authenticator
(as a second factor and alone), and a team that requires MFA. Screenshots of every page.

The tests share one server, each with an owner and a team of its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pyotp
import pytest
from playwright.sync_api import BrowserContext, Page

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.screenshots import screenshot

OWNER = "owner@example.org"
PASSWORD = "correct horse battery staple 42"


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    """One server for the module's tests: each has an owner and a team of its own."""
    with running_dashboard(tmp_path_factory.mktemp("mfa")) as server:
        yield server


def path_of(page: Page) -> str:
    return urlsplit(page.url).path


def log_out(page: Page) -> None:
    page.click('form[action="/logout"] button[type="submit"]')
    page.wait_for_load_state()
    assert path_of(page) == "/login", page.url


def enrol_totp(page: Page, server: DashboardServer) -> tuple[str, list[str]]:
    """Add an authenticator app from /account/mfa; returns its secret and the recovery codes."""
    page.goto(server.url("/account/mfa"))
    screenshot(page, "mfa-account-empty")
    page.click("#add-totp")
    page.wait_for_selector("#totp-qr")
    # The QR code is an image of its own: wait until it has loaded (or failed), then ask which.
    # A function, not an expression: the page's CSP refuses the eval polling an expression needs.
    page.wait_for_function("() => document.querySelector('#totp-qr').complete")
    assert page.eval_on_selector("#totp-qr", "img => img.naturalWidth > 0")
    screenshot(page, "mfa-totp-enrolment")
    secret = page.inner_text("#totp-secret").replace(" ", "")
    page.fill('input[name="code"]', "000000")
    page.click('form button[type="submit"].primary')
    page.wait_for_load_state()
    assert "not the one the app shows" in page.content()
    page.fill('input[name="code"]', pyotp.TOTP(secret).now())
    page.fill('input[name="name"]', "Work phone")
    page.click('form button[type="submit"].primary')
    page.wait_for_selector("#recovery-codes")
    screenshot(page, "mfa-recovery-codes")
    codes = [
        code.strip() for code in page.inner_text("#recovery-codes").split("\n") if code.strip()
    ]
    assert len(codes) == 10
    page.click("text=I have saved them")
    page.wait_for_selector("#mfa-devices")
    assert "Work phone" in page.inner_text("#mfa-devices")
    assert "10 unused recovery codes" in page.content()
    screenshot(page, "mfa-account-devices")
    return secret, codes


def sign_in_with_code(page: Page, server: DashboardServer, code: str) -> None:
    log_in(page, server, OWNER, PASSWORD)
    assert path_of(page) == "/login/mfa", page.url
    page.fill("#mfa-code", code)
    page.click('#mfa-code-form button[type="submit"]')
    page.wait_for_load_state()


def test_totp_enrolment_login_and_recovery_codes(
    dashboard_server: DashboardServer, page: Page
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Acme")
    log_in(page, dashboard_server, OWNER, PASSWORD)
    secret, codes = enrol_totp(page, dashboard_server)
    # The owner is told (no mail_from here: the notice goes to the log).
    notice = f"two-factor change notice for {OWNER}"
    dashboard_server.wait_for_log(notice)
    log_out(page)

    # The password alone now stops at the challenge; no page is reachable from there.
    log_in(page, dashboard_server, OWNER, PASSWORD)
    assert path_of(page) == "/login/mfa"
    screenshot(page, "mfa-challenge")
    page.goto(dashboard_server.url("/emails"))
    assert path_of(page) == "/login/mfa"
    page.fill("#mfa-code", "123456")
    page.click('#mfa-code-form button[type="submit"]')
    page.wait_for_load_state()
    assert path_of(page) == "/login/mfa" and "not accepted" in page.content()
    screenshot(page, "mfa-challenge-wrong-code")
    # The next step's code (the current one was used up by the enrolment).
    page.fill("#mfa-code", pyotp.TOTP(secret).at(time.time() + 30))
    page.click('#mfa-code-form button[type="submit"]')
    page.wait_for_load_state()
    assert path_of(page) == "/emails", page.url
    log_out(page)

    # A recovery code signs in once.
    sign_in_with_code(page, dashboard_server, codes[0])
    assert path_of(page) == "/emails", page.url
    page.goto(dashboard_server.url("/account/mfa"))
    assert "9 unused recovery codes" in page.content()
    log_out(page)
    sign_in_with_code(page, dashboard_server, codes[0])
    assert path_of(page) == "/login/mfa" and "not accepted" in page.content()

    # Removing the device needs the password (or a code); then the password alone suffices.
    page.fill("#mfa-code", codes[1])
    page.click('#mfa-code-form button[type="submit"]')
    page.wait_for_load_state()
    page.goto(dashboard_server.url("/account/mfa"))
    remove = '#mfa-devices form[action$="/remove"]'
    page.fill(f'{remove} input[name="password"]', "not the password")
    page.click(f"{remove} button")
    page.wait_for_load_state()
    assert "Enter your password or a current code" in page.content()
    page.fill(f'{remove} input[name="password"]', PASSWORD)
    page.click(f"{remove} button")
    page.wait_for_load_state()
    assert "Work phone removed" in page.content() and "No second factor yet" in page.content()
    assert dashboard_server.log_text().count(notice) == 2
    log_out(page)
    log_in(page, dashboard_server, OWNER, PASSWORD)
    assert path_of(page) == "/emails"


def add_virtual_authenticator(context: BrowserContext, page: Page) -> None:
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    options = {
        "protocol": "ctap2",
        "transport": "internal",
        "hasResidentKey": True,
        "hasUserVerification": True,
        "isUserVerified": True,
    }
    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})


def test_passkey_as_second_factor_and_alone(
    dashboard_server: DashboardServer, context: BrowserContext, page: Page
) -> None:
    owner = "owner@passkeys.example.org"
    add_virtual_authenticator(context, page)
    dashboard_server.create_user(owner, PASSWORD, team="Passkeys")
    log_in(page, dashboard_server, owner, PASSWORD)
    page.goto(dashboard_server.url("/account/mfa"))
    page.fill('#passkey-register-form input[name="name"]', "Laptop")
    page.click("#add-passkey")
    page.wait_for_selector("#recovery-codes")
    page.click("text=I have saved them")
    page.wait_for_selector("#mfa-devices")
    assert "Laptop" in page.inner_text("#mfa-devices")
    assert "Passkey" in page.inner_text("#mfa-devices")
    screenshot(page, "mfa-account-passkey")
    log_out(page)

    # Second factor after the password.
    log_in(page, dashboard_server, owner, PASSWORD)
    assert path_of(page) == "/login/mfa"
    page.wait_for_selector("#use-passkey")
    screenshot(page, "mfa-challenge-passkey")
    page.click("#use-passkey")
    page.wait_for_url(dashboard_server.url("/emails"))
    log_out(page)

    # Alone, from the login page: a discoverable credential names its user.
    page.goto(dashboard_server.url("/login?next=/domains"))
    page.wait_for_selector("#passkey-login")
    screenshot(page, "mfa-login-with-passkey")
    page.click("#passkey-login")
    page.wait_for_url(dashboard_server.url("/domains"))


MEMBER = "member@example.org"


def test_a_team_requiring_mfa_holds_members_without_it_at_enrolment(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "owner@required.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Required")
    log_in(page, dashboard_server, owner, PASSWORD)
    page.goto(dashboard_server.url("/team/mfa"))
    screenshot(page, "mfa-team-optional")
    page.check("#require-mfa")
    page.click('form[action="/team/mfa"] button[type="submit"]')
    page.wait_for_load_state()
    # The owner has no second factor yet: every page but enrolment sends them to add one.
    assert path_of(page) == "/account/mfa", page.url
    assert "Your team requires a second factor" in page.content()
    screenshot(page, "mfa-account-required")
    enrol_totp(page, dashboard_server)
    page.goto(dashboard_server.url("/team/mfa"))
    assert path_of(page) == "/team/mfa" and page.is_checked("#require-mfa")
    page.goto(dashboard_server.url("/account/mfa"))
    owner_device_id = page.get_attribute("#mfa-devices tr[data-device-id]", "data-device-id")
    log_out(page)

    # Another member without a second factor reaches nothing but enrolment.
    dashboard_server.create_user(MEMBER, PASSWORD, team="Required")
    log_in(page, dashboard_server, MEMBER, PASSWORD)
    assert path_of(page) == "/account/mfa", page.url
    for blocked in (
        "/emails",
        "/domains",
        "/api-keys",
        "/webhooks",
        "/team",
        "/team/mfa",
        "/account",
    ):
        page.goto(dashboard_server.url(blocked))
        assert path_of(page) == "/account/mfa", (blocked, page.url)
    secret, _ = enrol_totp(page, dashboard_server)
    page.goto(dashboard_server.url("/team/mfa"))
    assert path_of(page) == "/team/mfa"
    assert page.locator("#members-without-mfa").count() == 0
    screenshot(page, "mfa-team-required")

    # Another user's device is not found from this account, even with the right password.
    status = page.evaluate(
        """async ({deviceId, password}) => {
            const token = document.querySelector('input[name="csrf_token"]').value;
            const body = new URLSearchParams({csrf_token: token, password});
            const answer = await fetch(`/account/mfa/devices/${deviceId}/remove`,
                                       {method: "POST", body, redirect: "manual"});
            return answer.status;
        }""",
        {"deviceId": owner_device_id, "password": PASSWORD},
    )
    assert status == 404
    assert pyotp.TOTP(secret).now()
