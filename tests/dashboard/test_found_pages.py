"""The pages people looked for, in chromium against one live server whose team can send:
Templates (create, a refusal in words, publish, edit, a second version, and a send that uses
it), SMTP settings (the page's host, port, username and key log in over real SMTP), a scheduled
email rescheduled and canceled from its page, a webhook's URL and events changed from its page,
and the Brand kit in the menu and linked from the broadcast checklist's item that needs it. A
member of the team sees every page and no form on it, and each change they post is refused."""

from __future__ import annotations

import re
import smtplib
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.sending_team import PASSWORD, SendingTeam, sending_team
from tests.dashboard.test_isolation import accept_invitation, csrf_of, session_client
from tests.ports import free_port

OWNER = "owner@found-pages.test"
MEMBER = "member@found-pages.test"
DOMAIN = "found-pages.test"
SENDER = f"Shop <shop@{DOMAIN}>"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SendingTeam]:
    smtp_port, smtps_port = free_port(), free_port()
    with sending_team(
        tmp_path_factory.mktemp("found-pages"),
        owner=OWNER,
        domain=DOMAIN,
        starttls_listen=(f"127.0.0.1:{smtp_port}",),
        tls_listen=(f"127.0.0.1:{smtps_port}",),
    ) as made:
        yield made


@pytest.fixture(scope="module")
def member(team: SendingTeam, browser: Browser) -> Iterator[httpx.Client]:
    """A member of the team (invited by the owner, signed in): a client with their session."""
    profile = browser.new_context()
    page = profile.new_page()
    log_in(page, team.server, OWNER, PASSWORD)
    page.goto(team.server.url("/team"))
    page.fill("#invite-email", MEMBER)
    page.select_option("#invite-role", "member")
    page.click("#invite-form button[type=submit]")
    profile.close()
    link = team.server.wait_for_log(
        re.compile(rf"invitation link for {re.escape(MEMBER)}: (\S+)"), what="the link"
    ).group(1)
    client = session_client(team.server, accept_invitation(browser, link, "Mem", PASSWORD))
    yield client
    client.close()


def owner_page(page: Page, team: SendingTeam) -> Page:
    log_in(page, team.server, OWNER, PASSWORD)
    return page


def scheduled_email(team: SendingTeam) -> str:
    return team.created(
        "/emails",
        {
            "from": SENDER,
            "to": f"reader@{DOMAIN}",
            "subject": "Later",
            "text": "Hello",
            "scheduled_at": "in 1 hour",
        },
    )


def test_templates_are_made_published_edited_and_versioned(team: SendingTeam, page: Page) -> None:
    owner_page(page, team)
    page.click("nav >> text=Templates")
    expect(page.locator("nav a[aria-current=page]")).to_have_text("Templates")

    # A refusal keeps what was typed and says why.
    page.fill("#new-template-name", "Order")
    page.fill("#new-template-alias", "order/confirmation")
    page.fill("#new-template-subject", "Your {{{PRODUCT}}}")
    page.fill("#new-template-html", "<p>Thanks for the {{{PRODUCT}}}.</p>")
    page.fill("#new-template-variables", "PRODUCT = item")
    page.click("#new-template button[type=submit]")
    expect(page.locator("#template-error")).to_contain_text("alias field must be printable text")
    expect(page.locator("#new-template-subject")).to_have_value("Your {{{PRODUCT}}}")

    page.fill("#new-template-alias", "order")
    page.click("#new-template button[type=submit]")
    expect(page.locator(".flash-success")).to_contain_text("it is a draft until you publish it")
    expect(page.locator("#template-status")).to_have_text("draft")
    template_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#template-variables")).to_have_value("PRODUCT = item")

    page.click("form[action$='/publish'] button")
    expect(page.locator(".flash-success")).to_contain_text("Version 1 is published")
    expect(page.locator("#template-status")).to_have_text("published")

    # An edit waits for the next publish; sends keep version 1 meanwhile.
    page.fill("#template-subject", "Your {{{PRODUCT}}} is on its way")
    page.fill("#template-variables", "PRODUCT = item\nCOUNT: number = 1")
    page.click("form.template-form button[type=submit]")
    expect(page.locator(".flash-success")).to_contain_text("Publish to send with these changes")
    expect(page.locator("#publish-state")).to_contain_text("sends still use version 1")
    working = team.api.get(f"/templates/{template_id}").json()
    assert working["subject"] == "Your {{{PRODUCT}}} is on its way"
    assert [(v["key"], v["type"], v["fallback_value"]) for v in working["variables"]] == [
        ("PRODUCT", "string", "item"),
        ("COUNT", "number", 1),
    ]
    assert working["has_unpublished_versions"] is True

    page.click("form[action$='/publish'] button")
    expect(page.locator(".flash-success")).to_contain_text("Version 2 is published")
    expect(page.locator(".versions > li")).to_have_count(2)
    expect(page.locator(".versions > li").first).to_contain_text("sends use it")
    screenshot(page, "found-pages-template")

    sent = team.api.post(
        "/emails",
        json={
            "to": f"reader@{DOMAIN}",
            "from": SENDER,
            "template": {"id": "order", "variables": {"PRODUCT": "lamp"}},
            "scheduled_at": "in 1 day",
        },
    )
    assert sent.status_code == 200, sent.text
    email = team.api.get(f"/emails/{sent.json()['id']}").json()
    assert email["subject"] == "Your lamp is on its way"

    page.click("nav >> text=Templates")
    expect(page.locator(f"tr[data-template-id='{template_id}']")).to_contain_text("published")


def test_smtp_settings_are_the_running_servers(team: SendingTeam, page: Page) -> None:
    owner_page(page, team)
    page.click("nav >> text=SMTP")
    row = page.locator(".smtp-endpoints tbody tr", has_text="STARTTLS")
    host = row.locator("td").nth(0).locator("code").inner_text()
    port = int(row.locator("td").nth(1).inner_text())
    username = page.locator("#smtp-username").inner_text()
    expect(page.locator(".smtp-keys")).to_contain_text("pages: full access")
    screenshot(page, "found-pages-smtp")

    # What the page says is what works.
    token = team.api.headers["Authorization"].removeprefix("Bearer ")
    with smtplib.SMTP(host, port, timeout=30) as client:
        client.starttls(context=ssl._create_unverified_context())
        assert client.login(username, token)[0] == 235

    page.click("#smtp-api-keys")
    expect(page).to_have_url(re.compile(r"/api-keys$"))


def test_a_scheduled_email_is_rescheduled_then_canceled(team: SendingTeam, page: Page) -> None:
    email_id = scheduled_email(team)
    owner_page(page, team)
    page.goto(team.server.url(f"/emails/{email_id}"))

    # Earlier than now is refused in words, as the API refuses it.
    page.fill("#reschedule-at", "2020-01-01T09:00")
    page.click("#reschedule")
    expect(page.locator(".flash-error")).to_contain_text("must be in the future")

    paris = (datetime.now(UTC) + timedelta(days=2)).astimezone(ZoneInfo("Europe/Paris"))
    page.fill("#reschedule-at", f"{paris:%Y-%m-%dT%H:%M}")
    page.select_option("#reschedule-zone", "Europe/Paris")
    page.click("#reschedule")
    expect(page.locator(".flash-success")).to_contain_text(f"{paris:%Y-%m-%d %H:%M} Europe/Paris")
    utc = paris.astimezone(UTC)
    scheduled = team.api.get(f"/emails/{email_id}").json()["scheduled_at"]
    assert scheduled.startswith(f"{utc:%Y-%m-%d %H:%M}"), scheduled

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-email")
    expect(page.locator(".flash-success")).to_contain_text("it will not be sent")
    expect(page.locator("[data-email-id] [data-status]")).to_have_text("canceled")
    expect(page.locator("#schedule")).to_have_count(0)
    assert team.api.get(f"/emails/{email_id}").json()["last_event"] == "canceled"
    screenshot(page, "found-pages-canceled")


def test_a_webhooks_url_and_events_are_changed(team: SendingTeam, page: Page) -> None:
    webhook_id = team.created(
        "/webhooks", {"endpoint": "https://hooks.example.org/old", "events": ["email.sent"]}
    )
    owner_page(page, team)
    page.goto(team.server.url(f"/webhooks/{webhook_id}"))
    page.fill("#webhook-edit-endpoint", "https://user:secret@hooks.example.org/new")
    page.click("#webhook-edit button[type=submit]")
    expect(page.locator(".flash-error")).to_contain_text("credentials")

    page.fill("#webhook-edit-endpoint", "https://hooks.example.org/new")
    page.uncheck("#webhook-edit input[value='email.sent']")
    page.check("#webhook-edit input[value='email.bounced']")
    page.check("#webhook-edit input[value='contact.created']")
    page.click("#webhook-edit button[type=submit]")
    expect(page.locator(".flash-success")).to_contain_text("go to https://hooks.example.org/new")
    expect(page.locator("h1")).to_contain_text("https://hooks.example.org/new")
    changed = team.api.get(f"/webhooks/{webhook_id}").json()
    assert changed["endpoint"] == "https://hooks.example.org/new"
    assert changed["events"] == ["email.bounced", "contact.created"]


def test_the_brand_kit_is_in_the_menu_and_the_checklist_leads_to_it(
    team: SendingTeam, page: Page
) -> None:
    owner_page(page, team)
    page.goto(team.server.url("/broadcasts"))
    page.fill("#new-broadcast-name", "Brand check")
    page.click("form[action='/broadcasts'] button[type=submit]")
    page.wait_for_url(re.compile(r"/broadcasts/[0-9a-f-]+/edit$"))
    broadcast = page.url.removesuffix("/edit")
    page.goto(broadcast)
    item = page.locator("[data-check=postal_address]")
    expect(item).to_contain_text("postal address")
    item.locator("#checklist-brand-kit").click()
    expect(page).to_have_url(re.compile(r"/brand#brand-postal-address$"))
    expect(page.locator("nav a[aria-current=page]")).to_have_text("Brand kit")
    page.fill("#brand-postal-address", "1 Main Street, Springfield")
    page.click("#brand-form button[type=submit]")
    page.goto(broadcast)
    expect(page.locator("[data-check=postal_address]")).to_have_class(re.compile("passed"))
    expect(page.locator("#checklist-brand-kit")).to_have_count(0)


def test_a_member_sees_the_pages_without_their_forms(
    team: SendingTeam, member: httpx.Client
) -> None:
    template_id = team.created("/templates", {"name": "Seen", "html": "<p>Hi</p>"})
    email_id = scheduled_email(team)
    webhook_id = team.created(
        "/webhooks", {"endpoint": "https://hooks.example.org/m", "events": ["email.sent"]}
    )
    csrf = csrf_of(member.get("/emails").text)
    pages = {
        "/templates": "Seen",
        f"/templates/{template_id}": "<p>Hi</p>",
        f"/emails/{email_id}": "Later",
        f"/webhooks/{webhook_id}": "hooks.example.org/m",
        "/smtp": "postwire",
        "/brand": "Brand kit",
    }
    for path, shown in pages.items():
        answer = member.get(path)
        assert answer.status_code == 200, path
        assert shown in answer.text.replace("&lt;", "<").replace("&gt;", ">"), path
        main = answer.text.split("<main", 1)[1]
        assert 'method="post"' not in main, f"{path} offers a member a form"
    for path, form in (
        ("/templates", {"name": "No", "html": "<p>x</p>"}),
        (f"/templates/{template_id}", {"name": "No", "html": "<p>x</p>"}),
        (f"/templates/{template_id}/publish", {}),
        (f"/emails/{email_id}/reschedule", {"scheduled_at": "2030-01-01T09:00"}),
        (f"/emails/{email_id}/cancel", {}),
        (f"/webhooks/{webhook_id}", {"endpoint": "https://hooks.example.org/x"}),
    ):
        answer = member.post(path, data={"csrf_token": csrf, **form})
        assert answer.status_code == 403, f"POST {path} by a member: {answer.status_code}"
    assert team.api.get(f"/templates/{template_id}").json()["status"] == "draft"
    assert team.api.get(f"/emails/{email_id}").json()["last_event"] == "scheduled"
