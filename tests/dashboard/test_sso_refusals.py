"""What a sign-in through a provider refuses, in chromium against a live server whose Google
issuer is a provider of the test's own (`ForgingProvider`, tests/oidc_provider.py): ID tokens
with a bad signature, for another audience or issuer, expired, or carrying an earlier login's
nonce; a replayed callback; an unknown state; a callback carried to another browser (login
CSRF); a code from another login (PKCE); an open redirect through `next`. Each refusal is a
readable page; nobody is signed in."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from postwire.dashboard.pages.sso import STARTS_PER_MINUTE
from tests.dashboard.conftest import DashboardServer, free_port
from tests.dashboard.screenshots import screenshot
from tests.e2e.conftest import write_config
from tests.oidc_provider import ForgingProvider, forging_provider


@pytest.fixture(scope="module")
def forger() -> Iterator[ForgingProvider]:
    with forging_provider(email="pat@example.com") as provider:
        yield provider


@pytest.fixture(autouse=True)
def valid_tokens(forger: ForgingProvider) -> None:
    forger.mode = "valid"
    forger.hold_callbacks = False


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, forger: ForgingProvider
) -> Iterator[DashboardServer]:
    """One live server for the module (these tests change nothing but sign-ins)."""
    directory = tmp_path_factory.mktemp("sso-refusals")
    port = free_port()
    running = DashboardServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
    write_config(
        running.config_path,
        running.data_dir,
        dashboard_listen=f"127.0.0.1:{port}",
        dashboard_public_url=f"http://localhost:{port}",
        auth_signup="open",
        auth_extra=(
            f'google_client_id = "{forger.client_id}"\ngoogle_client_secret = "s"\n'
            f'google_issuer = "{forger.issuer}"'
        ),
    )
    running.start()
    yield running
    running.stop()


def _refused(page: Page, words: str, shot: str | None = None) -> None:
    expect(page.get_by_role("heading", name="Sign-in did not complete")).to_be_visible()
    expect(page.get_by_text(re.compile(words))).to_be_visible()
    if shot:
        screenshot(page, shot)
    # Nobody is signed in: the Emails page sends to the login.
    page.goto(page.url.split("/auth/")[0] + "/emails")
    expect(page).to_have_url(re.compile(r"/login\?next="))


def _held_callback(page: Page, server: DashboardServer, forger: ForgingProvider) -> str:
    """Start a Google sign-in in `page` and return the provider's callback URL, not followed."""
    forger.hold_callbacks = True
    page.goto(server.url("/login/google"))
    forger.hold_callbacks = False
    return forger.callbacks[-1]


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("bad_signature", "signature is not valid"),
        ("wrong_audience", "another client"),
        ("wrong_issuer", "another issuer"),
        ("expired", "has expired"),
        ("replayed_nonce", "nonce is not this sign-in's"),
    ],
)
def test_a_forged_id_token_is_refused(
    page: Page, server: DashboardServer, forger: ForgingProvider, mode: str, words: str
) -> None:
    # A first sign-in gives the provider a nonce to replay, and shows the valid path works.
    page.goto(server.url("/login/google"))
    page.wait_for_url(re.compile(r"/emails"))
    page.context.clear_cookies()
    forger.mode = mode
    page.goto(server.url("/login/google"))
    _refused(page, words, f"sso-refused-{mode.replace('_', '-')}")


def test_a_replayed_or_unknown_callback_is_refused(
    page: Page, server: DashboardServer, forger: ForgingProvider
) -> None:
    callback = _held_callback(page, server, forger)
    page.goto(callback)
    page.wait_for_url(re.compile(r"/emails"))
    page.context.clear_cookies()
    page.goto(callback)
    _refused(page, "already used or is unknown")
    page.goto(server.url("/auth/callback/google?code=x&state=made-up"))
    _refused(page, "already used or is unknown", "sso-refused-state")


def test_a_callback_carried_to_another_browser_is_refused(
    page: Page, browser: Browser, server: DashboardServer, forger: ForgingProvider
) -> None:
    callback = _held_callback(page, server, forger)
    victim = browser.new_context()
    try:
        tab = victim.new_page()
        tab.goto(callback)
        _refused(tab, "started in another browser", "sso-refused-other-browser")
    finally:
        victim.close()


def test_a_code_from_another_login_fails_its_pkce_check(
    page: Page, server: DashboardServer, forger: ForgingProvider
) -> None:
    first = httpx.URL(_held_callback(page, server, forger))
    second = httpx.URL(_held_callback(page, server, forger))
    # The first login's code with the second login's state: the verifier kept with the
    # second login does not match the challenge the first code was issued for.
    injected = second.copy_set_param("code", first.params["code"])
    page.goto(str(injected))
    _refused(page, "PKCE check failed", "sso-refused-pkce")
    assert forger.token_requests[-1]["code_verifier"]


def test_an_error_from_the_provider_is_shown_in_words(page: Page, server: DashboardServer) -> None:
    page.goto(server.url("/auth/callback/google?error=access_denied&state=x"))
    _refused(page, r"did not sign you in \(access_denied\)")


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "https:evil"]
)
def test_next_cannot_lead_off_the_dashboard(
    page: Page, server: DashboardServer, target: str
) -> None:
    page.goto(
        server.url("/login/google?next=" + httpx.URL("/", params={"n": target}).query.decode()[2:])
    )
    page.wait_for_url(re.compile(r"/emails$"))
    assert page.url.startswith(server.dashboard_url)


def test_an_unsolicited_saml_answer_is_refused_without_a_csrf_token(
    server: DashboardServer,
) -> None:
    response = httpx.post(
        server.url("/auth/saml/01a210fc-0000-7000-8000-000000000000/acs"),
        data={"SAMLResponse": "PHNhbWxwOlJlc3BvbnNlIEluUmVzcG9uc2VUbz0iaWQtMSIvPg=="},
    )
    assert response.status_code == 400
    assert "matches no sign-in started here" in response.text


def test_starting_too_many_sign_ins_from_one_address_is_refused(server: DashboardServer) -> None:
    # Last in the module: the address's starts stay counted for the rest of the minute. The
    # window is a calendar minute, so a run that crosses its end starts counting again: twice
    # the limit of starts always meets a refusal.
    statuses = []
    for _ in range(2 * STARTS_PER_MINUTE + 1):
        statuses.append(httpx.get(server.url("/login/google"), follow_redirects=False).status_code)
        if statuses[-1] != 303:
            break
    assert statuses[0] == 303 and statuses[-1] == 429
    refused = httpx.get(server.url("/login/google"), follow_redirects=False)
    assert "Too many sign-ins were started from your address" in refused.text
