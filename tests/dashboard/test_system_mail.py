"""System mail belongs to no team: with `auth.mail_from` under a team's verified domain, the
invitations and password resets it sends reach their recipients signed with that domain's DKIM
key, while a member of that team (the lowest role) finds nothing of them: not on the Emails or
Suppressions pages in a browser, not through `GET /emails` or `GET /emails/{id}` with the team's
API key, not at the team's webhook endpoint, not in the team's events or metrics counts, not in
its suppression list when one bounces. Nor are their links in the server's log."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default

import httpx
import pytest
import resend
from playwright.sync_api import Browser, Page, expect

from postwire.webhooks.store import EVENT_KINDS
from tests.dashboard.conftest import DashboardServer, StartDashboard, log_in
from tests.dashboard.test_people import _new_page
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    dkim_verifies,
    spool_events,
    verified_domain,
    wait_until,
)
from tests.e2e.test_metrics_counters import spool_counters, sums
from tests.smtp_receiver import ReceivedMessage, ScriptedSmtpReceiver
from tests.webhook_receiver import WebhookReceiver

OWNER = "owner@example.org"
MEMBER = "mo@example.net"
VICTIM = "victim@example.com"
GONE = "gone@example.net"  # an invitation to it bounces for good
PASSWORD = "correct horse battery staple 42"
MAIL_FROM = f"Postwire <accounts@{DOMAIN}>"


def _mail_to(receiver: ScriptedSmtpReceiver, address: str) -> ReceivedMessage:
    wait_until(
        lambda: any(address in m.rcpt_tos for m in receiver.received()), f"mail to {address}"
    )
    return next(m for m in receiver.received() if address in m.rcpt_tos)


def _parsed(received: ReceivedMessage) -> EmailMessage:
    message = message_from_bytes(received.content, policy=default)
    assert isinstance(message, EmailMessage)
    return message


def _link(received: ReceivedMessage, path: str) -> str:
    text = _parsed(received).get_body(("plain",))
    assert text is not None
    match = re.search(rf"(http://\S+{path}\S+)", text.get_content())
    assert match, text.get_content()
    return match.group(1)


def _email_id(received: ReceivedMessage) -> str:
    """The id Postwire gave the message: its Message-ID is `<id@domain>`."""
    return str(_parsed(received)["Message-ID"]).strip("<>").partition("@")[0]


@pytest.fixture
def hooks() -> Iterator[WebhookReceiver]:
    """The webhook endpoint of the team that owns `auth.mail_from`'s domain."""
    with WebhookReceiver() as receiver:
        yield receiver


def test_a_member_sees_nothing_of_system_mail(
    start_dashboard: StartDashboard,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    hooks: WebhookReceiver,
    browser: Browser,
    page: Page,
) -> None:
    server = start_dashboard(auth_extra=f'mail_from = "{MAIL_FROM}"', allow_private_webhooks=True)
    smtp_receiver.script.refuse_recipients[GONE] = "550 5.1.1 No such user"
    resend.api_url = server.base_url
    team_key = server.create_key("team key")  # makes the team that owns mail_from's domain
    resend.api_key = team_key
    try:
        verified_domain(dns_server, DOMAIN)
        resend.Webhooks.create({"endpoint": hooks.url, "events": list(EVENT_KINDS)})
    finally:
        resend.api_key = None
    server.create_user(OWNER, PASSWORD)  # the only team's owner
    server.create_user(VICTIM, PASSWORD, team="Elsewhere")  # someone of another team

    # The owner invites a member (the lowest role) and an address that bounces.
    log_in(page, server, OWNER, PASSWORD)
    for address in (MEMBER, GONE):
        page.goto(server.url("/team"))
        page.fill("#invite-email", address)
        page.select_option("#invite-role", "member")
        page.click("#invite-form button[type=submit]")
        expect(page.locator(".flash-success")).to_contain_text(f"sent to {address}")
    invitation = _mail_to(smtp_receiver, MEMBER)
    member = _new_page(browser)
    member.goto(_link(invitation, "/invite/"))
    member.fill("#invite-name", "Mo")
    member.fill("#invite-password", PASSWORD)
    member.fill("#invite-password-confirm", PASSWORD)
    member.click("form.stacked button[type=submit]")
    member.wait_for_load_state()

    # The member asks for the victim's password to be reset: the mail reaches the victim, signed.
    member.goto(server.url("/password/forgot"))
    member.fill("#forgot-email", VICTIM)
    member.click("form.stacked button[type=submit]")
    expect(member.locator("#forgot-answer")).to_be_visible()
    reset = _mail_to(smtp_receiver, VICTIM)
    assert dkim_verifies(reset.content, dns_server)
    assert dkim_verifies(invitation.content, dns_server)
    assert _parsed(reset)["From"] == MAIL_FROM
    reset_link = _link(reset, "/password/reset/")
    system_ids = [_email_id(reset), _email_id(invitation)]
    _member_finds_none(server, member, team_key, system_ids)

    # The bounce of the other invitation, then one email of the team's own, whose events reach
    # the webhook after any the system mail could raise.
    bounced = server.wait_for_log(r"system mail (\S+) to gone@example\.net bounced", what="bounce")
    resend.api_key = team_key
    own = resend.Emails.send(
        {"from": f"Shop <shop@{DOMAIN}>", "to": "ann@example.org", "subject": "Order 1",
         "text": "Thanks."}
    )["id"]  # fmt: skip
    resend.api_key = None
    wait_until(
        lambda: any(b'"email.delivered"' in post.body for post in hooks.posts()),
        "the team's own email.delivered to reach its webhook",
    )
    email_events = [
        json.loads(post.body)["data"]
        for post in hooks.posts()
        if json.loads(post.body)["type"].startswith("email.")
    ]  # the domain's own events (domain.updated) reach the hook too
    assert {event["email_id"] for event in email_events} == {own}
    _member_finds_none(server, member, team_key, [*system_ids, bounced.group(1)], own=own)
    member.goto(server.url("/suppressions"))
    assert GONE not in member.locator("main").inner_text()
    headers = {"Authorization": f"Bearer {team_key}"}
    with httpx.Client(base_url=server.base_url, headers=headers) as api:
        assert api.get("/suppressions").json()["data"] == []
        totals = api.get("/emails/metrics").json()["totals"]
    assert totals["sent"] == 1 and totals["delivered"] == 1 and totals["bounced"] == 0, totals

    # Nobody reading the log can take the links over.
    log = server.log_text()
    for link in (reset_link, _link(invitation, "/invite/")):
        assert link.rpartition("/")[2] not in log, link
    assert re.search(r"system mail \S+ accepted: password reset link to victim@example\.com", log)

    # What the store kept, read by an independent reader: every event and every metrics count
    # of any team is of the team's own email.
    server.stop()
    stored = spool_events(server.data_dir)
    assert {event["email_id"] for event in stored if event["type"].startswith("email.")} == {own}
    counts = sums(spool_counters(server.data_dir), r"metrics/[^/]+/h/\d+/(\w+)")
    assert counts == Counter({"sent": 1, "delivered": 1}), counts


def _member_finds_none(
    server: DashboardServer, member: Page, team_key: str, system_ids: list[str], own: str = ""
) -> None:
    """Neither the member's browser nor the team's API key shows a system message: the Emails
    page lists the team's own email (`own`) alone, and each system id is a 404."""
    member.goto(server.url("/emails"))
    if own:
        expect(member.locator("main")).to_contain_text("Order 1")
    listing = member.locator("main").inner_text()
    for text in (VICTIM, MEMBER, GONE, "Reset your Postwire password", " on Postwire"):
        assert text not in listing, text
    for email_id in system_ids:
        response = member.goto(server.url(f"/emails/{email_id}"))
        assert response is not None and response.status == 404, email_id
    headers = {"Authorization": f"Bearer {team_key}"}
    with httpx.Client(base_url=server.base_url, headers=headers) as api:
        listed = api.get("/emails").json()["data"]
        assert [email["id"] for email in listed] == ([own] if own else []), listed
        for email_id in system_ids:
            for path in (f"/emails/{email_id}", f"/emails/{email_id}/insights"):
                assert api.get(path).status_code == 404, path
