"""Unsubscribe end to end: a live `postwire serve` sends a broadcast through the real delivery
engine to Postfix's smtp-sink; each message's `List-Unsubscribe` fields are DKIM-signed and
name its recipient. A real HTTP client (httpx) does the one-click POST, the hosted page's form
posts and a forged link; smtplib writes to the mailto address over Postwire's STARTTLS
listener. The contacts flip as the SDK reads them, `contact.updated` arrives verified with
svix, and the broadcast counts each unsubscribe once. The tests share one server, each in a team
of its own sending from a domain of its own."""

from __future__ import annotations

import base64
import email
import email.policy
import json
import re
from collections.abc import Iterator
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
import resend
from svix.webhooks import Webhook

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, dkim_verifies, verified_domain, wait_until
from tests.e2e.test_broadcasts import broadcasting, sink, sunk_from
from tests.e2e.test_inbound_dsn import report
from tests.ports import free_address
from tests.webhook_receiver import WebhookReceiver

ONE_CLICK = {"List-Unsubscribe": "One-Click"}  # RFC 8058's body, form-encoded by httpx
PEOPLE = {"ann@example.org": "Ann", "bob@example.org": "Bob", "cay@example.org": "Cay"}
URL = re.compile(r"<(http://[^>]+/u/([A-Za-z0-9_-]{78}))>")
MAILTO = re.compile(r"<mailto:(unsub\+[A-Za-z0-9_-]{56}@[^>]+)>")

__all__ = ["sink"]  # a fixture used here


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def postwire_smtp() -> str:
    return free_address()


@pytest.fixture(scope="module")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory,
    knot: AuthoritativeDnsServer,
    sink: Path,
    postwire_smtp: str,
) -> Iterator[LiveServer]:
    with broadcasting(
        tmp_path_factory.mktemp("unsubscribe"), knot, sink, starttls_listen=(postwire_smtp,)
    ) as live:
        yield live


class Page(HTMLParser):
    """The hosted page's forms and checkboxes, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.forms: list[str] = []
        self.hidden: list[tuple[str | None, str | None]] = []
        self.boxes: dict[str, bool] = {}
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            assert found["method"] == "post"
            self.forms.append(found["action"] or "")
        elif tag == "input" and found.get("type") == "hidden":
            self.hidden.append((found["name"], found["value"]))
        elif tag == "input" and found.get("type") == "checkbox":
            self.boxes[found["value"] or ""] = "checked" in found

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())


def send_broadcast(domain: str, topic_id: str | None) -> tuple[str, dict[str, str]]:
    """A broadcast to a segment of `PEOPLE`, sent now; its id and each contact's id."""
    segment = resend.Segments.create({"name": "Readers"})
    contacts = {
        address: resend.Contacts.create(
            {"email": address, "first_name": name, "segments": [{"id": segment["id"]}]}
        )["id"]
        for address, name in PEOPLE.items()
    }
    params: dict[str, Any] = {
        "segment_id": segment["id"],
        "from": f"Acme News <news@{domain}>",
        "subject": "Hello {{{FIRST_NAME|there}}}",
        "html": '<p>Hi {{{FIRST_NAME}}}</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>',
        "send": True,
    }
    if topic_id is not None:
        params["topic_id"] = topic_id
    broadcast = resend.Broadcasts.create(params)
    return broadcast["id"], contacts


def delivered(sink: Path, domain: str, count: int) -> dict[str, EmailMessage]:
    """The broadcast's messages in the sink, by recipient, once `count` have arrived."""

    def all_delivered() -> bool:  # the sink's 250 to DATA comes once its file is whole
        emails = resend.Emails.list()["data"]
        return len([e for e in emails if e["last_event"] == "delivered"]) >= count

    wait_until(all_delivered, f"{count} messages delivered")
    messages = {}
    for sunk in sunk_from(sink, domain):
        parsed = email.message_from_bytes(sunk.content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        (recipient,) = sunk.rcpt_tos
        messages[recipient] = parsed
    return messages


def links_of(message: EmailMessage) -> tuple[str, str, str]:
    """(URL, token, mailto address) of a message's `List-Unsubscribe`."""
    field = str(message["List-Unsubscribe"])
    url, mailto = URL.search(field), MAILTO.search(field)
    assert url is not None and mailto is not None, field
    assert field == f"<{url[1]}>, <mailto:{mailto[1]}>"
    return url[1], url[2], mailto[1]


def contact_updates(receiver: WebhookReceiver, secret: str) -> list[dict[str, Any]]:
    """The `data` of every contact.updated POST, each verified with svix, in the order the
    changes happened (their `created_at`): webhooks may arrive out of order, as Resend's do."""
    payloads = []
    for post in receiver.posts():
        Webhook(secret).verify(post.body, post.headers)  # raises unless signed with `secret`
        payload = json.loads(post.body)
        assert payload["type"] == "contact.updated"
        payloads.append(payload)
    return [payload["data"] for payload in sorted(payloads, key=lambda p: p["created_at"])]


def mail_to(listener: str, rcpt_to: str) -> tuple[int, bytes]:
    """What a mailbox provider does with a mailto unsubscribe (STARTTLS, no AUTH), as a remote
    MTA sends a report; the reply to RCPT if refused, else to DATA."""
    message = f"From: bob@example.org\r\nTo: <{rcpt_to}>\r\nSubject: unsubscribe\r\n\r\n"
    return report(listener, rcpt_to, message.encode() + b"Unsubscribe me.\r\n")


def swap_contact(token: str, contact_id: str) -> str:
    """`token` naming another contact, its tag unchanged: what an attacker would try."""
    raw = bytearray(base64.urlsafe_b64decode(token + "=="))
    raw[32:48] = bytes.fromhex(contact_id.replace("-", ""))
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def test_one_click_page_and_mailto_unsubscribe(
    team_server: LiveServer,
    dns_server: AuthoritativeDnsServer,
    sink: Path,
    receiver: WebhookReceiver,
    postwire_smtp: str,
) -> None:
    domain = "unsubscribe-links.test"
    verified_domain(dns_server, domain)
    hook = resend.Webhooks.create({"endpoint": receiver.url, "events": ["contact.updated"]})
    broadcast_id, contacts = send_broadcast(domain, topic_id=None)
    ann, bob, cay = (contacts[address] for address in PEOPLE)
    messages = delivered(sink, domain, len(PEOPLE))

    # Every message carries its own recipient's links, signed by DKIM.
    links = {address: links_of(message) for address, message in messages.items()}
    assert len({token for _, token, _ in links.values()}) == len(PEOPLE)
    for address, message in messages.items():
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        tags = re.sub(r"\s", "", str(message["DKIM-Signature"])).split(";")
        (signed,) = [tag[2:].lower().split(":") for tag in tags if tag.startswith("h=")]
        assert {"list-unsubscribe", "list-unsubscribe-post"} <= set(signed)
        body = message.get_body(("html",))
        assert body is not None and links[address][0] in body.get_content()
    raw = next(s.content for s in sunk_from(sink, domain) if s.rcpt_tos == ["ann@example.org"])
    assert dkim_verifies(raw, dns_server)

    ann_url, ann_token, _ = links["ann@example.org"]
    with httpx.Client(timeout=10) as http:
        # A forged link: another contact's id in Ann's token. Refused, nothing changes.
        forged = http.post(ann_url.replace(ann_token, swap_contact(ann_token, bob)), data=ONE_CLICK)
        assert forged.status_code == 404
        assert "text/html" in forged.headers["content-type"]
        assert "not valid" in forged.text
        assert resend.Contacts.get(id=bob)["unsubscribed"] is False

        # The one-click POST, as Gmail sends it: no cookie, no page.
        clicked = http.post(ann_url, data=ONE_CLICK)
        assert (clicked.status_code, clicked.text) == (200, "Unsubscribed\n")
        assert resend.Contacts.get(id=ann)["unsubscribed"] is True
        wait_until(lambda: len(receiver.posts()) == 1, "contact.updated for Ann")
        (update,) = contact_updates(receiver, hook["signing_secret"])
        assert (update["id"], update["email"], update["unsubscribed"]) == (
            ann, "ann@example.org", True
        )  # fmt: skip
        assert http.post(ann_url, data=ONE_CLICK).status_code == 200  # a retry: no change

        # The hosted page: a GET changes nothing; its form POST unsubscribes.
        cay_url, cay_token, _ = links["cay@example.org"]
        shown = http.get(cay_url)
        assert shown.status_code == 200
        csp = shown.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp
        page = Page(shown.text)
        assert "cay@example.org" in page.text and page.hidden == [("action", "unsubscribe")]
        assert page.forms == [f"/u/{cay_token}"]
        (stylesheet,) = re.findall(r'href="(/u/assets/[^"]+\.css)"', shown.text)
        css = http.get(team_server.base_url + stylesheet)
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert resend.Contacts.get(id=cay)["unsubscribed"] is False
        confirmed = http.post(cay_url, data={"action": "unsubscribe"})
        assert confirmed.status_code == 200
        assert Page(confirmed.text).hidden == [("action", "resubscribe")]
        assert resend.Contacts.get(id=cay)["unsubscribed"] is True
        again = http.post(cay_url, data={"action": "resubscribe"})
        assert Page(again.text).hidden == [("action", "unsubscribe")]
        assert resend.Contacts.get(id=cay)["unsubscribed"] is False

    # Mail to the mailto address unsubscribes Bob; a forged one is refused at RCPT.
    _, _, bob_mailto = links["bob@example.org"]
    local, _, host = bob_mailto.partition("@")
    assert len(local) <= 64 and host == f"send.{domain}"
    forged_mailto = f"{local[:-1]}{'B' if local[-1] == 'A' else 'A'}@{host}"
    assert mail_to(postwire_smtp, forged_mailto) == (550, b"5.1.1 No such unsubscribe address")
    assert mail_to(postwire_smtp, bob_mailto) == (250, b"2.0.0 OK unsubscribed")
    assert resend.Contacts.get(id=bob)["unsubscribed"] is True

    # Ann (once, despite the retry), Cay out and back, Bob: each change once, in order.
    wait_until(lambda: len(receiver.posts()) == 4, "four contact.updated webhooks")
    updates = contact_updates(receiver, hook["signing_secret"])
    assert [(u["id"], u["unsubscribed"]) for u in updates] == [
        (ann, True), (cay, True), (cay, False), (bob, True)
    ]  # fmt: skip
    # Cay unsubscribed and came back: counted once, like Ann and Bob.
    assert resend.Broadcasts.get(broadcast_id)["counts"]["unsubscribed"] == 3


def test_a_topic_broadcast_unsubscribes_from_its_topic_and_the_page_sets_preferences(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer, sink: Path
) -> None:
    domain = "unsubscribe-topics.test"
    verified_domain(dns_server, domain)
    news = resend.Topics.create(
        {"name": "News", "default_subscription": "opt_in", "visibility": "public"}
    )["id"]
    offers = resend.Topics.create(
        {"name": "Offers", "default_subscription": "opt_out", "visibility": "public"}
    )["id"]
    internal = resend.Topics.create({"name": "Internal", "default_subscription": "opt_in"})["id"]
    _, contacts = send_broadcast(domain, topic_id=news)
    ann = contacts["ann@example.org"]
    messages = delivered(sink, domain, len(PEOPLE))
    url, token, _ = links_of(messages["ann@example.org"])

    def subscriptions() -> dict[str, str]:
        listed = resend.Contacts.Topics.list(ann)
        return {topic["id"]: topic["subscription"] for topic in listed["data"]}

    with httpx.Client(timeout=10) as http:
        page = Page(http.get(url).text)
        assert page.boxes == {news: True, offers: False}  # public topics only
        assert page.forms == [f"/u/{token}", f"/u/{token}/topics"]

        assert http.post(url, data=ONE_CLICK).status_code == 200
        contact = resend.Contacts.get(id=ann)
        assert contact["unsubscribed"] is False  # out of News only
        assert subscriptions()[news] == "opt_out"

        saved = http.post(f"{url}/topics", data={"topic": [offers, internal]})
        assert saved.status_code == 200 and "Your preferences are saved." in saved.text
        assert Page(saved.text).boxes == {news: False, offers: True}
    assert subscriptions() == {news: "opt_out", offers: "opt_in", internal: "opt_in"}
