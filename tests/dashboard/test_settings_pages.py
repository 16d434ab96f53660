"""The Domains, API keys, Webhooks and Suppressions pages in chromium, against a live server:
a domain added, its records published in Knot and verified, tracking toggled, the domain
deleted; a key created whose token (shown once) works with the resend SDK, another team's key
a 404; a suppression added, found and removed; a webhook endpoint whose event's attempts are
shown and replayed. Screenshots of every page.

The tests share one server, each signed in as an owner of a team of its own and adding domain
names of its own; the webhook replay needs private addresses allowed and has a server of its
own."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
import resend
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import DashboardServer, StartDashboard, log_in
from tests.dashboard.module_server import create_key_in_page, running_dashboard
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import wait_until
from tests.webhook_receiver import Answer, WebhookReceiver

OWNER = "owner@example.org"
PASSWORD = "correct horse battery staple 42"
DOMAIN = "settings-example.test"
MEMBER = "mem@example.net"
MEMBER_PASSWORD = "a member's long passphrase"


@pytest.fixture(scope="module")
def settings_server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[DashboardServer]:
    """One server for the module, verifying domains against the session's Knot."""
    directory = tmp_path_factory.mktemp("settings-pages")
    with running_dashboard(directory, nameservers=(knot.nameserver,)) as server:
        yield server


@pytest.fixture
def signed_in(
    settings_server: DashboardServer, page: Page, request: pytest.FixtureRequest
) -> DashboardServer:
    """Signed in as the owner of a team of the test's own, both named after the test."""
    name = request.node.name.removeprefix("test_")
    owner = f"{name[:40]}@settings.example.org"
    settings_server.create_user(owner, PASSWORD, team=f"Settings: {name}")
    log_in(page, settings_server, owner, PASSWORD)
    return settings_server


@pytest.fixture
def sdk() -> Iterator[None]:
    yield
    resend.api_key = None


def path_of(page: Page) -> str:
    return urlsplit(page.url).path


def reload_until(page: Page, condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    """Reload the page until `condition` holds of it (what the server does after its answer
    shows on a later load)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}:\n{page.content()}"
        time.sleep(0.3)
        page.reload()


def csrf_token(page: Page) -> str:
    return page.locator("input[name=csrf_token]").first.get_attribute("value") or ""


def test_a_domain_is_added_verified_against_knot_tracked_and_deleted(
    signed_in: DashboardServer, page: Page, dns_server: AuthoritativeDnsServer
) -> None:
    page.goto(signed_in.url("/domains"))
    expect(page.locator(".empty")).to_contain_text("No domains yet")
    screenshot(page, "settings-domains-empty")

    page.fill("#domain-name", DOMAIN)
    page.select_option("#domain-region", "eu-west-1")
    page.click("form[action='/domains'] button[type=submit]")
    assert re.fullmatch(r"/domains/[0-9a-f-]+", path_of(page)), page.url
    domain_path = path_of(page)
    expect(page.locator(".flash-success")).to_contain_text(f"{DOMAIN} was added")
    expect(page.locator("h1 .badge")).to_have_text("Not started")

    # Each record's name and value have a copy button carrying exactly what is shown.
    rows = page.locator("table.dns-records tbody tr")
    assert rows.count() == 4
    published = 0
    for index in range(rows.count()):
        row = rows.nth(index)
        record_type = row.locator("td").nth(0).inner_text().split()[0]
        host = row.locator("td").nth(1).locator("code").inner_text()
        value = row.locator("td").nth(2).locator("code").inner_text()
        assert row.locator("td").nth(1).locator("button.copy").get_attribute("data-copy") == host
        assert row.locator("td").nth(2).locator("button.copy").get_attribute("data-copy") == value
        assert host.endswith("." + DOMAIN)
        if record_type == "MX":
            priority = row.locator("td").nth(3).inner_text()
            dns_server.publish(host, "MX", f"{priority} {value}.")
        else:
            dns_server.publish(host, record_type, value)
        published += 1
    assert published == 4
    screenshot(page, "settings-domain-records")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    dkim = rows.filter(has_text="DKIM").locator("td").nth(2)
    dkim.locator("button.copy").click()
    expect(dkim.locator("button.copy.copied")).to_have_count(1)
    assert page.evaluate("navigator.clipboard.readText()") == dkim.locator("code").inner_text()

    page.click(f"form[action='{domain_path}/verify'] button")
    expect(page.locator(".flash-success")).to_contain_text("Verification started")
    # domains.js refreshes the statuses while records are pending: no reload needed.
    expect(page.locator("h1 .badge")).to_have_text("Verified", timeout=20_000)
    required = page.locator("table.dns-records tbody td .badge")
    assert required.all_inner_texts() == ["Verified"] * 3  # DMARC is only recommended
    screenshot(page, "settings-domain-verified")

    page.check("input[name=open_tracking]")
    page.click(f"form[action='{domain_path}/tracking'] button")
    expect(page.locator(".flash-success")).to_have_text("Tracking settings saved.")
    expect(page.locator("input[name=open_tracking]")).to_be_checked()
    expect(page.locator("input[name=click_tracking]")).not_to_be_checked()
    page.goto(signed_in.url("/domains"))
    expect(page.locator("table")).to_contain_text("opens")
    expect(page.locator("table .badge")).to_have_text("Verified")
    screenshot(page, "settings-domains-list")

    # Deleting asks first, on a page of its own (no JavaScript needed).
    page.goto(signed_in.url(domain_path))
    page.click("a.button.danger")
    assert path_of(page) == f"{domain_path}/delete"
    screenshot(page, "settings-domain-delete")
    page.click("form button.danger")
    assert path_of(page) == "/domains"
    expect(page.locator(".flash-success")).to_have_text(f"{DOMAIN} was deleted.")
    expect(page.locator(".empty")).to_be_visible()
    assert page.goto(signed_in.url(domain_path)).status == 404  # type: ignore[union-attr]


def test_a_domain_name_refused_is_said_in_plain_words(
    signed_in: DashboardServer, page: Page
) -> None:
    page.goto(signed_in.url("/domains"))
    page.fill("#domain-name", "not a domain")
    page.click("form[action='/domains'] button[type=submit]")
    assert path_of(page) == "/domains"
    expect(page.locator(".flash-error")).to_be_visible()
    assert "`" not in page.locator(".flash-error").inner_text()


def test_a_key_token_is_shown_once_and_works_with_the_sdk(
    signed_in: DashboardServer, page: Page, sdk: None
) -> None:
    page.goto(signed_in.url("/api-keys"))
    screenshot(page, "settings-api-keys-empty")
    token = create_key_in_page(page, signed_in, "Deploys")
    screenshot(page, "settings-api-key-created")

    resend.api_url, resend.api_key = signed_in.base_url, token
    listed = resend.ApiKeys.list()["data"]
    assert [key["name"] for key in listed] == ["Deploys"]
    key_id = listed[0]["id"]

    # Never again: not on the list, not after a reload.
    page.goto(signed_in.url("/api-keys"))
    assert token not in page.content()
    row = page.locator(f"tr[data-key-id='{key_id}']")
    expect(row).to_contain_text("Full access")
    # The API writes a key's use after its answer.
    reload_until(page, lambda: "never" not in row.inner_text(), "the key's use is shown")
    screenshot(page, "settings-api-keys")

    page.click(f"tr[data-key-id='{key_id}'] a.button.danger")
    screenshot(page, "settings-api-key-delete")
    page.click("form button.danger")
    expect(page.locator(".flash-success")).to_contain_text("Deploys was deleted")
    with pytest.raises(resend.exceptions.ResendError):
        resend.ApiKeys.list()


def test_a_sending_key_keeps_its_domain_and_a_bad_name_is_refused(
    signed_in: DashboardServer, page: Page
) -> None:
    domain = f"keys-{DOMAIN}"
    page.goto(signed_in.url("/domains"))
    page.fill("#domain-name", domain)
    page.click("form[action='/domains'] button[type=submit]")
    page.goto(signed_in.url("/api-keys"))
    page.fill("#key-name", "Shop")
    page.select_option("#key-permission", "sending_access")
    page.select_option("#key-domain", label=domain)
    page.click("form[action='/api-keys'] button[type=submit]")
    expect(page.locator("table")).to_contain_text("Sending access")
    expect(page.locator("table")).to_contain_text(domain)

    page.goto(signed_in.url("/api-keys"))
    page.fill("#key-name", "   ")
    page.click("form[action='/api-keys'] button[type=submit]")
    assert path_of(page) == "/api-keys"
    expect(page.locator(".flash-error")).to_contain_text("name field must be a non-empty")


def test_another_teams_key_is_not_found(signed_in: DashboardServer, page: Page, sdk: None) -> None:
    outsider_token = signed_in.create_key("Outsider", new_team="Elsewhere")
    resend.api_url, resend.api_key = signed_in.base_url, outsider_token
    outsider_id = resend.ApiKeys.list()["data"][0]["id"]

    page.goto(signed_in.url("/api-keys"))
    csrf = csrf_token(page)
    answer = page.goto(signed_in.url(f"/api-keys/{outsider_id}/delete"))
    assert answer is not None and answer.status == 404
    # Even a well-formed POST with this browser's own CSRF token cannot reach it.
    posted = page.request.post(
        signed_in.url(f"/api-keys/{outsider_id}/delete"),
        form={"csrf_token": csrf},
        max_redirects=0,
    )
    assert posted.status == 404
    assert [key["id"] for key in resend.ApiKeys.list()["data"]] == [outsider_id]


def test_a_suppression_is_added_searched_and_removed(
    signed_in: DashboardServer, page: Page
) -> None:
    page.goto(signed_in.url("/suppressions"))
    expect(page.locator(".empty")).to_have_text("No suppressed addresses.")
    for address in ("Bounced@Example.net", "kept@example.org"):
        page.fill("#suppression-email", address)
        page.click("form[method=post][action='/suppressions'] button")
        expect(page.locator(".flash-success")).to_contain_text(address.lower())
    screenshot(page, "settings-suppressions")

    page.fill("#suppression-search", "bounced")
    page.click("form.filters button")
    expect(page.locator("table tbody tr")).to_have_count(1)
    expect(page.locator("table")).to_contain_text("bounced@example.net")
    expect(page.locator("table")).to_contain_text("Added by hand")
    screenshot(page, "settings-suppressions-search")
    page.goto(signed_in.url("/suppressions?q=nobody"))
    expect(page.locator(".empty")).to_have_text("No suppressed address matches.")

    page.goto(signed_in.url("/suppressions"))
    page.click("button[aria-label='Remove bounced@example.net']")
    expect(page.locator(".flash-success")).to_contain_text("bounced@example.net is sent again")
    expect(page.locator("table tbody tr")).to_have_count(1)
    expect(page.locator("table")).to_contain_text("kept@example.org")

    # The browser's own check of type=email is bypassed: the server's is the one that counts.
    page.evaluate("document.querySelector('#suppression-email').type = 'text'")
    page.fill("#suppression-email", "Ann <ann@example.org>")
    page.click("form[method=post][action='/suppressions'] button")
    expect(page.locator(".flash-error")).to_have_text("The email field must be an email address.")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    # The first POST fails, so the event shows a failed attempt before the replay succeeds.
    hook = WebhookReceiver(answer=lambda n: Answer(status=500 if n == 0 else 204))
    hook.start()
    yield hook
    hook.stop()


def test_a_webhook_event_shows_its_attempts_and_is_replayed(
    start_dashboard: StartDashboard, page: Page, receiver: WebhookReceiver, sdk: None
) -> None:
    server = start_dashboard(allow_private_webhooks=True)
    server.create_user(OWNER, PASSWORD, team="Hooks")
    log_in(page, server, OWNER, PASSWORD)
    token = create_key_in_page(page, server, "Contacts")

    page.goto(server.url("/webhooks"))
    expect(page.locator(".empty")).to_have_text("No endpoints yet.")
    page.fill("#webhook-endpoint", receiver.url)
    for box in page.locator("input[name=events]").all():
        box.uncheck()
    page.check("input[name=events][value='contact.created']")
    page.click("form[action='/webhooks'] button[type=submit]")
    secret = page.locator("#signing-secret").inner_text()
    assert secret.startswith("whsec_")
    screenshot(page, "settings-webhook-created")
    page.goto(server.url("/webhooks"))
    expect(page.locator("table")).to_contain_text(receiver.url)
    screenshot(page, "settings-webhooks-list")
    page.click(f"text={receiver.url}")
    endpoint_path = path_of(page)
    assert secret not in page.content()

    resend.api_url, resend.api_key = server.base_url, token
    resend.Contacts.create({"email": "ada@example.org"})
    wait_until(lambda: len(receiver.posts()) == 1, "the first POST")
    # In a closed <details> until opened: in the page, not in its visible text.
    reload_until(page, lambda: "HTTP 500" in page.content(), "the failed attempt is shown")
    row = page.locator("table.webhook-events tbody tr").first
    expect(row).to_contain_text("contact.created")
    row.locator("summary").click()
    screenshot(page, "settings-webhook-endpoint")

    row.locator("a").click()
    expect(page.locator("table.attempts")).to_contain_text("500")
    expect(page.locator("pre.payload")).to_contain_text("ada@example.org")
    screenshot(page, "settings-webhook-event")
    page.click("form[action$='/replay'] button")
    expect(page.locator(".flash-success")).to_contain_text("will be sent again now")
    wait_until(lambda: len(receiver.posts()) >= 2, "the replayed POST")
    assert {post.headers["svix-id"] for post in receiver.posts()} == {
        receiver.posts()[0].headers["svix-id"]
    }
    attempts = page.locator("table.attempts")
    reload_until(page, lambda: "204" in attempts.inner_text(), "the replay's attempt is shown")
    expect(page.locator("h1 .badge")).to_have_text("Delivered")

    page.goto(server.url(endpoint_path))
    page.click("text=Rotate signing secret")
    rotated = page.locator("#signing-secret").inner_text()
    assert rotated.startswith("whsec_") and rotated != secret
    screenshot(page, "settings-webhook-rotated")

    page.goto(server.url(endpoint_path))
    page.click("form[action$='/status'] button")
    expect(page.locator("h1 .badge")).to_have_text("disabled")
    page.click("a.button.danger")
    screenshot(page, "settings-webhook-delete")
    page.click("form button.danger")
    assert path_of(page) == "/webhooks"
    expect(page.locator(".empty")).to_have_text("No endpoints yet.")
    screenshot(page, "settings-webhooks-empty")


def test_an_inward_endpoint_is_refused_without_the_operators_consent(
    signed_in: DashboardServer, page: Page
) -> None:
    page.goto(signed_in.url("/webhooks"))
    page.fill("#webhook-endpoint", "http://127.0.0.1:9/hook")
    page.click("form[action='/webhooks'] button[type=submit]")
    assert path_of(page) == "/webhooks"
    expect(page.locator(".flash-error")).to_contain_text(
        "host 127.0.0.1 is a private, loopback or reserved address"
    )


def test_a_member_reads_every_settings_page_and_changes_nothing(
    signed_in: DashboardServer, page: Page, browser: Browser
) -> None:
    domain = f"members-{DOMAIN}"
    page.goto(signed_in.url("/domains"))
    page.fill("#domain-name", domain)
    page.click("form[action='/domains'] button[type=submit]")
    domain_path = path_of(page)
    page.goto(signed_in.url("/team"))
    page.fill("#invite-email", MEMBER)
    page.select_option("#invite-role", "member")
    page.click("#invite-form button[type=submit]")
    pattern = re.compile(rf"invitation link for {re.escape(MEMBER)}: (\S+)")
    link = signed_in.wait_for_log(pattern, what="the invitation link").group(1)

    profile = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    member = profile.new_page()
    try:
        member.goto(link)
        member.fill("#invite-name", "Mem")
        member.fill("#invite-password", MEMBER_PASSWORD)
        member.fill("#invite-password-confirm", MEMBER_PASSWORD)
        member.click("form.stacked button[type=submit]")
        member.wait_for_load_state()
        for path in ("/domains", domain_path, "/api-keys", "/webhooks", "/suppressions"):
            answer = member.goto(signed_in.url(path))
            assert answer is not None and answer.status == 200, path
            # Forms of the page itself: none but the search (GET); the top bar's sign-out stays.
            assert member.locator("main form[method=post]").count() == 0, path
        refused = member.goto(signed_in.url(f"{domain_path}/delete"))  # the confirmation too
        assert refused is not None and refused.status == 403
        member.goto(signed_in.url(domain_path))
        expect(member.locator("h1")).to_contain_text(domain)
        screenshot(member, "settings-domain-as-member")

        csrf = csrf_token(member)
        for path, form in (
            ("/suppressions", {"email": "x@example.org"}),
            ("/api-keys", {"name": "sneaky"}),
            (f"{domain_path}/delete", {}),
        ):
            posted = member.request.post(
                signed_in.url(path), form={"csrf_token": csrf, **form}, max_redirects=0
            )
            assert posted.status == 403, path
    finally:
        profile.close()
    page.goto(signed_in.url("/suppressions"))
    expect(page.locator(".empty")).to_have_text("No suppressed addresses.")
    page.goto(signed_in.url("/api-keys"))
    expect(page.locator(".empty")).to_have_text("No API keys yet.")
