"""Invitations are no spam or phishing cannon. A team renamed to a lure invites one outside
address 30 times at once (30 parallel form posts, on a server running `processes = 2`, while
another process on the same spool invites it 10 times more): no more than
`auth.invitations_per_address_per_hour` invitations are made and mailed, and the
mail's subject is Postwire's own, the team's name only quoted (and cut) in its body. Then 30
invitations to 30 addresses at once stop at the team's hourly limit. Refusals count for
nothing, so exactly the limits get through. Without `auth.mail_from`
the Team page shows the link to copy instead of saying that an invitation was sent."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import DashboardServer, StartDashboard, log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_people import _link, _new_page, verify_mail_domain
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, _clean_env, wait_until
from tests.smtp_receiver import ScriptedSmtpReceiver

OWNER = "owner@example.org"
PASSWORD = "correct horse battery staple 42"
VICTIM = "victim@outside.example"
LURE = "URGENT - your mailbox is suspended, verify at https://evil.example/login within 24 hours"
BURST = 30
BESIDE = 10
PER_ADDRESS = 3  # the default
PER_TEAM = 13


def _burst(page: Page, server: DashboardServer, addresses: list[str]) -> list[str]:
    """POST the invitation form for each of `addresses` at once, each from its own connection
    in the signed-in browser's session; the flash each answer led to."""
    cookies = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    csrf = page.locator('#invite-form input[name="csrf_token"]').get_attribute("value")
    assert csrf

    def invite(address: str) -> str:
        with httpx.Client(base_url=server.dashboard_url, timeout=60) as client:
            headers = {"Cookie": cookies, "Origin": server.dashboard_url}
            form = {"csrf_token": csrf, "email": address, "role": "member"}
            answer = client.post("/team/invitations", data=form, headers=headers)
            assert answer.status_code == 303, answer.text
            flash = answer.cookies.get("pw_flash")
            assert flash
            shown = client.get("/team", headers={"Cookie": f"{cookies}; pw_flash={flash}"})
            assert shown.status_code == 200
            if "An invitation was sent" in shown.text:
                return "sent"
            assert "within the hour" in shown.text, shown.text
            return "refused"

    with ThreadPoolExecutor(len(addresses)) as pool:
        return list(pool.map(invite, addresses))


def _message(content: bytes) -> EmailMessage:
    message = message_from_bytes(content, policy=default)
    assert isinstance(message, EmailMessage)
    return message


def test_a_lure_team_cannot_flood_an_address_or_put_its_name_in_the_subject(
    start_dashboard: StartDashboard,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    page: Page,
) -> None:
    server = start_dashboard(
        auth_extra=f'mail_from = "Postwire <accounts@{DOMAIN}>"\n'
        f"invitations_per_team_per_hour = {PER_TEAM}",
        processes=2,
    )
    verify_mail_domain(server, dns_server)
    server.create_user(OWNER, PASSWORD, team="Acme")
    log_in(page, server, OWNER, PASSWORD)
    page.goto(server.url("/team"))
    page.fill("#team-name", LURE)
    page.locator("form[action='/team/name'] button").click()
    expect(page.locator("h1")).to_have_text(LURE)

    # 30 through the dashboard and 10 more from another process on the same spool, at once.
    beside = subprocess.Popen(
        [sys.executable, "-m", "tests.dashboard.invite_from_another_process",
         str(server.config_path), OWNER, VICTIM, str(BESIDE)],
        stdout=subprocess.PIPE, text=True, env=_clean_env(),
    )  # fmt: skip
    outcomes = _burst(page, server, [VICTIM] * BURST)
    from_beside, _ = beside.communicate(timeout=120)
    assert beside.returncode == 0
    outcomes += from_beside.split()
    assert len(outcomes) == BURST + BESIDE
    sent = outcomes.count("sent")
    assert sent == PER_ADDRESS, outcomes  # no fewer either: a refusal counts for nothing
    wait_until(lambda: len(smtp_receiver.received()) == sent, f"{sent} invitations to arrive")
    for received in smtp_receiver.received():
        assert received.rcpt_tos == [VICTIM]
        message = _message(received.content)
        assert message["Subject"] == "Invitation to a team on Postwire"
        text = message.get_body(("plain",))
        assert text is not None
        body = " ".join(text.get_content().split())  # unfolded
        assert f"named “{LURE[:59]}…”" in body  # quoted, cut to 60 characters
        assert f"{OWNER} invited you" in body
    page.goto(server.url("/team"))
    expect(page.locator(f'#invitations tr[data-invitation="{VICTIM}"]')).to_have_count(1)

    # The team has used 3 of its 13: 30 more addresses at once get 10 through.
    addresses = [f"person{n}@outside.example" for n in range(BURST)]
    outcomes = _burst(page, server, addresses)
    also_sent = outcomes.count("sent")
    assert also_sent == PER_TEAM - PER_ADDRESS, outcomes
    total = sent + also_sent
    wait_until(lambda: len(smtp_receiver.received()) == total, f"{total} invitations to arrive")
    page.goto(server.url("/team"))
    expect(page.locator("#invitations tbody tr")).to_have_count(1 + also_sent)
    page.fill("#invite-email", "one.more@outside.example")
    page.click("#invite-form button[type=submit]")
    expect(page.locator(".flash-error")).to_contain_text(
        f"This team has sent {PER_TEAM} invitations within the hour"
    )
    screenshot(page, "invitations-over-the-team-limit")


def test_without_mail_from_the_team_page_shows_the_link_to_copy(
    dashboard_server: DashboardServer, page: Page, browser: Browser
) -> None:
    dashboard_server.create_user(OWNER, PASSWORD, team="Acme")
    log_in(page, dashboard_server, OWNER, PASSWORD)
    page.goto(dashboard_server.url("/team"))
    page.fill("#invite-email", VICTIM)
    page.click("#invite-form button[type=submit]")
    shown = page.locator("#invitation-link")
    expect(shown).to_contain_text("No mail was sent")
    expect(shown).to_contain_text(f"Give this link to {VICTIM}")
    expect(page.locator(".flash-success")).to_have_count(0)
    expect(page.locator(f'#invitations tr[data-invitation="{VICTIM}"]')).to_have_count(1)
    screenshot(page, "invitation-link-to-copy")
    link = page.locator("#invitation-url").inner_text()
    assert link == _link(dashboard_server, "invitation", VICTIM)
    assert page.locator("#invitation-link button.copy").get_attribute("data-copy") == link

    # Shown once: the Team page opened again has no link on it.
    page.goto(dashboard_server.url("/team"))
    expect(page.locator("#invitation-link")).to_have_count(0)
    invited = _new_page(browser)
    invited.goto(link)
    expect(invited.locator("h1")).to_have_text("Join Acme")
