"""The dashboard's shell in chromium: login and logout, the wrong-password answer, CSRF
refusals, session fixation, open redirects after login, security headers (and no CSP
violation on the page), team switching and open sign-up.

The tests share one server (invitation-only sign-up), each with an owner and teams of its own;
open sign-up has a server of its own."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page

from tests.dashboard.conftest import DashboardServer, StartDashboard, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.screenshots import screenshot

PASSWORD = "correct horse battery staple 42"


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    """One server for the module's tests: each signs in as an owner and team of its own."""
    with running_dashboard(tmp_path_factory.mktemp("shell")) as server:
        yield server


def path_of(page: Page) -> str:
    return urlsplit(page.url).path


def session_cookie(page: Page) -> str | None:
    return next((c["value"] for c in page.context.cookies() if c["name"] == "pw_session"), None)


def test_login_lands_on_emails_and_sign_out_ends_the_session(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "signs-out@shell.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Acme")
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.goto(dashboard_server.url("/"))
    assert path_of(page) == "/login"
    screenshot(page, "login")
    log_in(page, dashboard_server, owner, PASSWORD)
    assert path_of(page) == "/emails"
    nav = page.locator("nav.nav a")
    assert nav.all_inner_texts() == [
        "Emails", "Metrics", "Broadcasts", "Templates", "Brand kit", "Audience", "Domains",
        "API keys", "SMTP", "Webhooks", "Suppressions", "Team", "Account",
    ]  # fmt: skip
    assert page.locator(".team-name").inner_text() == "Acme"
    cookie = next(c for c in page.context.cookies() if c["name"] == "pw_session")
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
    screenshot(page, "signed-in")

    page.click("text=Sign out")
    page.wait_for_load_state()
    assert path_of(page) == "/login"
    page.goto(dashboard_server.url("/domains"))
    assert path_of(page) == "/login" and "next=/domains" in page.url
    assert violations == []


def test_a_wrong_password_and_an_unknown_user_get_the_same_message(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "mistyped@shell.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Wrong password")
    messages = []
    for email, password in [(owner, "not the password"), ("nobody@example.org", PASSWORD)]:
        log_in(page, dashboard_server, email, password)
        assert path_of(page) == "/login"
        messages.append(page.locator(".flash-error").inner_text())
        assert page.input_value('input[name="email"]') == email  # kept for another try
    assert messages == ["Wrong email or password."] * 2
    screenshot(page, "login-wrong-password")


def test_a_form_posted_without_its_csrf_token_is_refused(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "csrf@shell.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="CSRF")
    page.goto(dashboard_server.url("/login"))
    # The browser's own cookies go with it, as they would with a form from another site.
    refused = page.request.post(
        dashboard_server.url("/login"), form={"email": owner, "password": PASSWORD}
    )
    assert refused.status == 403
    assert "This form was refused" in refused.text()
    assert "Traceback" not in refused.text()
    log_in(page, dashboard_server, owner, PASSWORD)
    refused = page.request.post(dashboard_server.url("/logout"), form={})
    assert refused.status == 403
    page.goto(dashboard_server.url("/emails"))
    assert path_of(page) == "/emails"  # still signed in
    page.set_content(refused.text())
    screenshot(page, "csrf-refused")


def test_a_session_cookie_planted_before_login_is_not_the_one_after(
    dashboard_server: DashboardServer, page: Page
) -> None:
    owner = "fixation@shell.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Fixation")
    planted = "attacker-chosen-session-token-0123456789abcdefghijklmnop"
    page.context.add_cookies(
        [{"name": "pw_session", "value": planted, "url": dashboard_server.url("/")}]
    )
    log_in(page, dashboard_server, owner, PASSWORD)
    assert path_of(page) == "/emails"
    after = session_cookie(page)
    assert after is not None and after != planted
    page.goto(dashboard_server.url("/login"))
    assert path_of(page) == "/emails"  # signed in: the login page sends on


def test_no_open_redirect_after_login(dashboard_server: DashboardServer, page: Page) -> None:
    owner = "redirected@shell.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Redirects")
    for next_url in ("//evil.example/", "https://evil.example/", "/\\evil.example/"):
        page.context.clear_cookies()
        page.goto(dashboard_server.url("/login?next=") + next_url)
        page.fill('input[name="email"]', owner)
        page.fill('input[name="password"]', PASSWORD)
        page.click('form button[type="submit"]')
        page.wait_for_load_state()
        assert urlsplit(page.url).netloc == urlsplit(dashboard_server.dashboard_url).netloc
        assert path_of(page) == "/emails"
    page.context.clear_cookies()
    page.goto(dashboard_server.url("/domains"))
    log_in_here(page, owner, PASSWORD)
    assert path_of(page) == "/domains"  # a local next is followed


def log_in_here(page: Page, email: str, password: str) -> None:
    """Sign in on the login page already shown (keeping its `next`)."""
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.click('form button[type="submit"]')
    page.wait_for_load_state()


def test_security_headers_on_pages_and_assets(
    dashboard_server: DashboardServer, page: Page
) -> None:
    response = page.goto(dashboard_server.url("/login"))
    assert response is not None
    headers = response.headers
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    assert headers["cache-control"] == "no-store"
    stylesheet = page.locator('link[rel="stylesheet"]').first.get_attribute("href")
    assert stylesheet is not None
    asset = page.request.get(dashboard_server.url(stylesheet))
    assert asset.status == 200
    assert "immutable" in asset.headers["cache-control"]
    assert asset.headers["x-content-type-options"] == "nosniff"
    # The stylesheet applied (CSP let it in): the page is not unstyled.
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(246, 247, 249)"


def test_switching_between_teams(dashboard_server: DashboardServer, page: Page) -> None:
    owner = "switches@shell.example.org"
    dashboard_server.create_user(owner, PASSWORD, team="Alpha")
    dashboard_server.create_user(owner, PASSWORD, team="Beta")
    log_in(page, dashboard_server, owner, PASSWORD)
    select = page.locator("#team-switch-select")
    assert select.locator("option").all_inner_texts() == ["Alpha", "Beta"]
    before = select.input_value()
    other = next(
        v
        for v in select.locator("option").evaluate_all("options => options.map(o => o.value)")
        if v != before
    )
    select.select_option(other)  # dashboard.js submits the form on change
    page.wait_for_url("**/emails")
    assert page.locator("#team-switch-select").input_value() == other
    screenshot(page, "team-switched")


def test_open_signup_makes_an_owner(start_dashboard: StartDashboard, page: Page) -> None:
    server = start_dashboard(auth_signup="open")
    page.goto(server.url("/login"))
    page.click("text=Sign up")
    assert path_of(page) == "/signup"
    screenshot(page, "signup")
    page.fill("#name", "Grace Hopper")
    page.fill("#email", "grace@example.org")
    page.fill("#password", PASSWORD)
    page.fill("#team", "Navy")
    page.click('form button[type="submit"]')
    page.wait_for_load_state()
    assert path_of(page) == "/emails"
    assert page.locator(".team-name").inner_text() == "Navy"
    # Its address is checked by a link (written to the log: no auth.mail_from here).
    server.wait_for_log(r"/verify/", 15, what="the address check link")


def test_signup_closed_when_invite_only(dashboard_server: DashboardServer, page: Page) -> None:
    page.goto(dashboard_server.url("/signup"))
    assert "Sign-up is by invitation" in page.content()
    assert page.locator("text=Sign up").count() == 0
