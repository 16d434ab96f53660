"""Broadcasts end to end: the `resend` SDK drives a live `postwire serve` whose domain is
verified against Knot DNS, and the real delivery engine hands every message to Postfix's
smtp-sink. Each message arrives personalized, DKIM-valid for dkimpy with `List-Unsubscribe` and
`List-Unsubscribe-Post` in its signature's h=, and members who unsubscribed, opted out of the
broadcast's topic or are suppressed are skipped with exact counts. A cancel stops a walk
midway; scheduled broadcasts wait for their time; every refusal has the documented shape.

The audience is written through the audience store beside the running server (as an operator
command opens the spool), so these tests depend on nothing but the broadcast API for what they
check. The tests share one server, each in a team of its own sending from a domain of its own;
the one that needs a slow walk has a server of its own."""

from __future__ import annotations

import email
import email.policy
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest
import resend
import resend.exceptions
import trio
from svix.webhooks import Webhook

from postwire._core import WriteBatch, new_id
from postwire.config import load_config
from postwire.store.accounts import authenticate, contract_timestamp
from postwire.store.contact_properties import ContactPropertyRecord, put_property
from postwire.store.contacts import ContactRecord, put_contact
from postwire.store.segments import SegmentRecord, put_segment
from postwire.store.spool import Spool, serve_spool
from postwire.store.topics import TopicRecord, put_topic
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    LiveServer,
    dkim_verifies,
    serving,
    verified_domain,
    wait_until,
)
from tests.peers import require_peer
from tests.ports import free_address
from tests.smtp_sink import (
    SunkMessage,
    dump_directory,
    running_smtp_sink,
    smtp_sink_binary,
    sunk_messages,
)
from tests.webhook_receiver import WebhookReceiver

SUBJECT = "{{{contact.first_name|Hello}}}, the news"
HTML = (
    "<html><body><p>Hi {{{FIRST_NAME|there}}}, you are on {{{contact.plan}}}.</p>"
    '<p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p></body></html>'
)


@dataclass(frozen=True)
class Audience:
    segment_id: str
    topic_id: str
    emails: list[str]  # by member number


def member_email(number: int) -> str:
    return f"m{number:04d}@example.org"


def member_first_name(number: int) -> str | None:
    return None if number % 10 == 3 else f"Ann{number}"


def seed_audience(
    live: LiveServer,
    token: str,
    members: int,
    *,
    unsubscribed: range = range(0),
    opted_out: range = range(0),
) -> Audience:
    """Write a property `plan` (fallback "free"), a topic (opt-in by default) and a segment of
    `members` contacts through the audience store beside the running server, as an operator
    command does; even members are on plan "pro"."""

    async def write() -> Audience:
        config = load_config(live.config_path)
        async with trio.open_nursery() as nursery:
            spool: Spool = await nursery.start(serve_spool, config)
            key = authenticate(spool, token)
            assert key is not None
            team = key.team_id
            stamp = contract_timestamp(datetime.now(UTC))
            topic = TopicRecord(new_id(), team, "News", None, "opt_in", "public", stamp)
            segment = SegmentRecord(new_id(), team, "Everyone", stamp)
            batch = WriteBatch()
            put_property(
                batch, ContactPropertyRecord(new_id(), team, "plan", "string", "free", stamp)
            )
            put_topic(batch, topic)
            put_segment(batch, segment)
            await spool.commit(batch)  # the segment exists before contacts join it
            batch = WriteBatch()
            for number in range(members):
                contact = ContactRecord(
                    id=new_id(),
                    team_id=team,
                    email=member_email(number),
                    first_name=member_first_name(number),
                    last_name="Lee",
                    unsubscribed=number in unsubscribed,
                    created_at=stamp,
                    updated_at=stamp,
                    properties={"plan": "pro"} if number % 2 == 0 else {},
                    segment_ids=[segment.id],
                    topics={topic.id: "opt_out"} if number in opted_out else {},
                )
                put_contact(batch, spool, None, contact, 0, event=None)
            await spool.commit(batch)
            nursery.cancel_scope.cancel()
        return Audience(segment.id, topic.id, [member_email(n) for n in range(members)])

    return trio.run(write)


@dataclass
class Setup:
    live: LiveServer
    sink: Path
    token: str
    receiver: WebhookReceiver
    domain: str  # the test's own sending domain: the first team to verify a name owns it

    @property
    def sender(self) -> str:
        return f"Acme News <news@{self.domain}>"

    def sunk(self) -> list[SunkMessage]:
        return sunk_from(self.sink, self.domain)


def sunk_from(sink: Path, domain: str) -> list[SunkMessage]:
    """What smtp-sink received from `domain` (the envelope sender is under it): a shared server
    delivers other tests' mail to the same sink."""
    return [m for m in sunk_messages(sink) if m.mail_from.endswith(f".{domain}")]


@pytest.fixture(scope="module")
def sink() -> Iterator[Path]:
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with dump_directory() as directory:
        yield directory


@contextmanager
def broadcasting(
    tmp_path: Path, knot: AuthoritativeDnsServer, sink: Path, **config: Any
) -> Iterator[LiveServer]:
    """A live server delivering example.org to a smtp-sink that keeps what it receives in
    `sink`, its API on an address known before it starts (the links in mail are built on
    it), webhooks allowed to reach a receiver on loopback; `config` as `serving` takes it."""
    listen = free_address()
    with (
        running_smtp_sink(sink) as (host, port),
        serving(
            tmp_path,
            knot,
            routes={"example.org": f"{host}:{port}"},
            api_listen=listen,
            public_url=f"http://{listen}",
            allow_private_webhooks=True,
            **config,
        ) as live,
    ):
        yield live


@pytest.fixture(scope="module")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer, sink: Path
) -> Iterator[LiveServer]:
    with broadcasting(tmp_path_factory.mktemp("broadcasts"), knot, sink) as live:
        yield live


@contextmanager
def receiving_webhooks() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


def own_domain(request: pytest.FixtureRequest) -> str:
    return request.node.name.removeprefix("test_")[:40].replace("_", "-").strip("-") + ".test"


@pytest.fixture
def setup(team_server: LiveServer, sink: Path, request: pytest.FixtureRequest) -> Iterator[Setup]:
    with receiving_webhooks() as receiver:
        yield Setup(team_server, sink, str(resend.api_key), receiver, own_domain(request))


@pytest.fixture
def slow_setup(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, request: pytest.FixtureRequest
) -> Iterator[Setup]:
    """A server of its own whose walk is slow enough to cancel midway."""
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with (
        dump_directory() as sink,
        broadcasting(
            tmp_path, dns_server, sink, tables="\n[broadcasts]\nrate = 40\npage_size = 5\n"
        ) as live,
        receiving_webhooks() as receiver,
    ):
        yield Setup(live, sink, str(resend.api_key), receiver, own_domain(request))


def broadcast(broadcast_id: str) -> dict[str, Any]:
    return dict(resend.Broadcasts.get(broadcast_id))


def wait_for_status(broadcast_id: str, status: str, timeout: float = 60.0) -> dict[str, Any]:
    wait_until(lambda: broadcast(broadcast_id)["status"] == status, f"status {status}", timeout)
    return broadcast(broadcast_id)


def dkim_signed_names(message: EmailMessage) -> list[str]:
    signature = " ".join(str(message["DKIM-Signature"]).split())
    match = re.search(r"\bh=([^;]+)", signature)
    assert match is not None
    return [name.strip().lower() for name in match.group(1).replace(" ", "").split(":")]


def parsed(content: bytes) -> EmailMessage:
    message = email.message_from_bytes(content, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def api(live: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=live.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def test_a_broadcast_reaches_each_member_personalized_signed_and_unsubscribable(
    setup: Setup, dns_server: AuthoritativeDnsServer
) -> None:
    verified_domain(dns_server, setup.domain)
    hook = resend.Webhooks.create({"endpoint": setup.receiver.url, "events": ["email.sent"]})
    audience = seed_audience(
        setup.live, setup.token, 300, unsubscribed=range(0, 5), opted_out=range(5, 10)
    )
    for number in range(10, 15):
        resend.Suppressions.add({"email": member_email(number)})

    created = resend.Broadcasts.create(
        {"segment_id": audience.segment_id, "from": setup.sender, "subject": "draft",
         "html": HTML, "topic_id": audience.topic_id, "reply_to": "help@" + setup.domain,
         "name": "November"}
    )  # fmt: skip
    draft = broadcast(created["id"])
    assert (draft["status"], draft["name"], draft["audience_id"]) == (
        "draft", "November", audience.segment_id,
    )  # fmt: skip
    assert (draft["segment_id"], draft["topic_id"], draft["reply_to"]) == (
        audience.segment_id, audience.topic_id, [f"help@{setup.domain}"],
    )  # fmt: skip
    assert draft["counts"]["queued"] == 0 and draft["sent_at"] is None
    resend.Broadcasts.update({"broadcast_id": created["id"], "subject": SUBJECT})
    listed = resend.Broadcasts.list()["data"]
    assert [item["id"] for item in listed] == [created["id"]]
    assert listed[0]["status"] == "draft"

    sent = resend.Broadcasts.send({"broadcast_id": created["id"]})
    assert sent["id"] == created["id"]
    done = wait_for_status(created["id"], "sent")
    # Once delivery recorded each one, smtp-sink has written it whole.
    wait_until(lambda: broadcast(created["id"])["counts"]["delivered"] == 285, "all delivered")
    messages = setup.sunk()
    assert len(messages) == 285

    counts = done["counts"]
    assert (counts["queued"], counts["skipped_unsubscribed"], counts["skipped_topic"]) == (
        285,
        5,
        5,
    )
    assert (counts["suppressed"], counts["failed"]) == (5, 0)
    assert done["sent_at"] is not None
    assert broadcast(created["id"])["counts"]["sent"] == 285

    raw = {message.rcpt_tos[0]: message.content for message in messages}
    by_recipient = {recipient: parsed(content) for recipient, content in raw.items()}
    assert sorted(by_recipient) == sorted(audience.emails[15:])
    for number in (15, 23, 100, 299):  # 23 has no first name, odd ones no plan
        message = by_recipient[member_email(number)]
        name = member_first_name(number)
        assert message["Subject"] == f"{name or 'Hello'}, the news"
        html = message.get_body(("html",))
        text = message.get_body(("plain",))
        assert html is not None and text is not None
        plan = "pro" if number % 2 == 0 else "free"
        assert f"Hi {name or 'there'}, you are on {plan}." in html.get_content()
        assert f"Hi {name or 'there'}, you are on {plan}." in text.get_content()
        assert message["Reply-To"] == f"help@{setup.domain}"
    for recipient, message in list(by_recipient.items())[:40]:
        assert dkim_verifies(raw[recipient], dns_server)
        signed = dkim_signed_names(message)
        assert {"list-unsubscribe", "list-unsubscribe-post"} <= set(signed)
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        targets = re.fullmatch(r"<(\S+)>, <mailto:(\S+)>", str(message["List-Unsubscribe"]))
        assert targets is not None
        url, mailto = targets.groups()
        assert url.startswith(f"{setup.live.base_url}/u/")
        assert mailto.startswith("unsub+") and mailto.endswith(f"@send.{setup.domain}")
        html = message.get_body(("html",))
        assert html is not None and f'href="{url}"' in html.get_content()
    links = {str(m["List-Unsubscribe"]) for m in by_recipient.values()}
    assert len(links) == 285  # each member's own

    # The recipients lists, paged with the SDK.
    suppressed = resend.Broadcasts.recipients(created["id"], {"type": "suppressed"})["data"]
    assert sorted(row["email"] for row in suppressed) == audience.emails[10:15]
    assert all(row["contact_id"] for row in suppressed)
    first = resend.Broadcasts.recipients(created["id"], {"type": "delivered", "limit": 100})
    assert first["has_more"] and len(first["data"]) == 100
    seen = {row["email"] for row in first["data"]}
    after = first["data"][-1]["id"]
    while True:
        page = resend.Broadcasts.recipients(
            created["id"], {"type": "delivered", "limit": 100, "after": after}
        )
        seen |= {row["email"] for row in page["data"]}
        if not page["has_more"]:
            break
        after = page["data"][-1]["id"]
    assert seen == set(audience.emails[15:])
    one = resend.Broadcasts.recipients(created["id"], {"type": "sent", "email": "M0100@"})
    assert [row["email"] for row in one["data"]] == [member_email(100)]

    # The one-click unsubscribe of one recipient's link counts for the broadcast.
    url = re.search(r"<(\S+)>", str(by_recipient[member_email(20)]["List-Unsubscribe"]))
    assert url is not None
    answer = httpx.post(url.group(1), content=b"List-Unsubscribe=One-Click",
                        headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert answer.status_code == 200
    assert broadcast(created["id"])["counts"]["unsubscribed"] == 1
    unsubscribed = resend.Broadcasts.recipients(created["id"], {"type": "unsubscribed"})["data"]
    assert [row["email"] for row in unsubscribed] == [member_email(20)]

    # email.sent webhooks of the broadcast's emails carry its id.
    wait_until(lambda: len(setup.receiver.received) >= 1, "an email.sent webhook")
    post = setup.receiver.received[0]
    Webhook(hook["signing_secret"]).verify(post.body, post.headers)
    payload = json.loads(post.body)
    assert payload["type"] == "email.sent"
    assert payload["data"]["broadcast_id"] == created["id"]
    assert resend.Emails.get(payload["data"]["email_id"])["to"][0].endswith("@example.org")

    # A sent broadcast is no longer changed, sent again, canceled or deleted.
    for call in (
        lambda: resend.Broadcasts.update({"broadcast_id": created["id"], "subject": "x"}),
        lambda: resend.Broadcasts.send({"broadcast_id": created["id"]}),
        lambda: resend.Broadcasts.cancel(created["id"]),
        lambda: resend.Broadcasts.remove(created["id"]),
    ):
        with pytest.raises(resend.exceptions.ResendError) as refused:
            call()
        assert "this broadcast is `sent`" in str(refused.value)


PROBE = "probe@example.org"


def test_cancel_stops_the_walk_midway(
    slow_setup: Setup, dns_server: AuthoritativeDnsServer
) -> None:
    setup = slow_setup
    verified_domain(dns_server, setup.domain)
    audience = seed_audience(setup.live, setup.token, 200)
    created = resend.Broadcasts.create(
        {"segment_id": audience.segment_id, "from": setup.sender, "subject": "Hi",
         "text": "Hello", "send": True}
    )  # fmt: skip
    assert broadcast(created["id"])["status"] in ("queued", "sending")
    wait_until(lambda: broadcast(created["id"])["counts"]["queued"] >= 20, "a few pages out")
    assert broadcast(created["id"])["status"] == "sending"
    canceled = resend.Broadcasts.cancel(created["id"])
    assert (canceled["object"], canceled["id"]) == ("broadcast", created["id"])
    stopped = broadcast(created["id"])
    assert stopped["status"] == "canceled"
    queued = stopped["counts"]["queued"]
    assert 20 <= queued < 200
    # A broadcast sent after the cancel has its turn only once the canceled one's turn in hand
    # has ended: had its walk gone on, more of its members would be enqueued by then.
    probe_segment = resend.Segments.create({"name": "Probe"})["id"]
    resend.Contacts.create({"email": PROBE, "segments": [{"id": probe_segment}]})
    probe = resend.Broadcasts.create(
        {"segment_id": probe_segment, "from": setup.sender, "subject": "Probe", "text": "Hi",
         "send": True}
    )  # fmt: skip
    wait_for_status(probe["id"], "sent")
    assert broadcast(created["id"])["counts"]["queued"] == queued
    wait_until(
        lambda: broadcast(created["id"])["counts"]["delivered"] == queued, "enqueued ones went out"
    )
    assert len([m for m in setup.sunk() if m.rcpt_tos != [PROBE]]) == queued
    with pytest.raises(resend.exceptions.ResendError):
        resend.Broadcasts.cancel(created["id"])


def test_scheduled_broadcasts_wait_for_their_time_or_go_back_to_draft(
    setup: Setup, dns_server: AuthoritativeDnsServer
) -> None:
    verified_domain(dns_server, setup.domain)
    audience = seed_audience(setup.live, setup.token, 3)
    body = {"segment_id": audience.segment_id, "from": setup.sender, "subject": "Hi",
            "text": "Hello"}  # fmt: skip

    later = resend.Broadcasts.create({**body, "send": True, "scheduled_at": "in 1 hour"})
    scheduled = broadcast(later["id"])
    assert scheduled["status"] == "scheduled" and scheduled["scheduled_at"] is not None
    resend.Broadcasts.update({"broadcast_id": later["id"], "subject": "Still editable"})
    # It will be sent as it now is: an edit that could not be sent is refused.
    with pytest.raises(resend.exceptions.ResendError, match="not verified"):
        resend.Broadcasts.update({"broadcast_id": later["id"], "from": "a@unverified.example"})
    with pytest.raises(resend.exceptions.ResendError, match="`html` or `text`"):
        resend.Broadcasts.update({"broadcast_id": later["id"], "text": None})
    resend.Broadcasts.cancel(later["id"])
    back = broadcast(later["id"])
    assert (back["status"], back["scheduled_at"], back["subject"]) == (
        "draft", None, "Still editable",
    )  # fmt: skip

    soon = resend.Broadcasts.create(body)
    resend.Broadcasts.send({"broadcast_id": soon["id"], "scheduled_at": "in 2 seconds"})
    waiting = broadcast(soon["id"])
    assert waiting["status"] == "scheduled"
    assert waiting["counts"]["queued"] == 0
    done = wait_for_status(soon["id"], "sent", timeout=20)
    assert done["counts"]["queued"] == 3
    # Not before its time (the API's fixed-width UTC timestamps compare as text).
    assert done["sent_at"] >= waiting["scheduled_at"]
    wait_until(lambda: broadcast(soon["id"])["counts"]["delivered"] == 3, "the three delivered")
    assert len(setup.sunk()) == 3

    copy = resend.Broadcasts.duplicate(soon["id"])
    duplicated = broadcast(copy["id"])
    assert (duplicated["status"], duplicated["subject"], duplicated["counts"]["queued"]) == (
        "draft", "Hi", 0,
    )  # fmt: skip
    removed = resend.Broadcasts.remove(copy["id"])
    assert (removed["object"], removed["id"], removed["deleted"]) == ("broadcast", copy["id"], True)
    with pytest.raises(resend.exceptions.ResendError):
        resend.Broadcasts.get(copy["id"])
    page = resend.Broadcasts.list({"limit": 1})
    assert page["has_more"] and [b["id"] for b in page["data"]] == [soon["id"]]
    rest = resend.Broadcasts.list({"limit": 10, "after": soon["id"]})
    assert [b["id"] for b in rest["data"]] == [later["id"]] and not rest["has_more"]


def test_refusals_have_the_documented_shape(
    setup: Setup, dns_server: AuthoritativeDnsServer
) -> None:
    audience = seed_audience(setup.live, setup.token, 2)
    other_token = setup.live.create_key("other", new_team="broadcast refusals: another team")
    theirs = seed_audience(setup.live, other_token, 1)
    client = api(setup.live, setup.token)
    body = {"segment_id": audience.segment_id, "from": setup.sender, "subject": "Hi",
            "text": "Hello"}  # fmt: skip

    def refused(response: httpx.Response, status: int, name: str, words: str) -> None:
        assert response.status_code == status, response.text
        answer = response.json()
        assert (answer["statusCode"], answer["name"]) == (status, name)
        assert words in answer["message"], answer

    post: Callable[..., httpx.Response] = client.post
    refused(post("/broadcasts", json={**body, "segment_id": None}), 422,
            "missing_required_field", "`segment_id`")  # fmt: skip
    refused(post("/broadcasts", json={**body, "from": None}), 422, "missing_required_field",
            "`from`")  # fmt: skip
    refused(post("/broadcasts", json={**body, "subject": None}), 422, "missing_required_field",
            "`subject`")  # fmt: skip
    refused(post("/broadcasts", json={**body, "from": "not an address"}), 422,
            "validation_error", "`from`")  # fmt: skip
    refused(post("/broadcasts", json={**body, "segment_id": "nope"}), 422, "validation_error",
            "UUID")  # fmt: skip
    refused(post("/broadcasts", json={**body, "segment_id": theirs.segment_id}), 404,
            "not_found", "Segment not found")  # fmt: skip
    refused(post("/broadcasts", json={**body, "topic_id": theirs.topic_id}), 404, "not_found",
            "Topic not found")  # fmt: skip
    refused(post("/broadcasts", json={**body, "scheduled_at": "in 1 hour"}), 422,
            "validation_error", "`send: true`")  # fmt: skip
    refused(post("/broadcasts", json={**body, "send": "yes"}), 422, "validation_error", "`send`")
    # The domain is not verified: refused when sent, as /emails refuses it.
    refused(post("/broadcasts", json={**body, "send": True}), 403, "validation_error",
            "not verified")  # fmt: skip
    draft = post("/broadcasts", json={**body, "text": None}).json()["id"]
    refused(post(f"/broadcasts/{draft}/send", json={}), 422, "missing_required_field",
            "`html` or `text`")  # fmt: skip
    refused(client.patch(f"/broadcasts/{draft}", json={"broadcast_id": draft}), 422,
            "missing_required_field", "change")  # fmt: skip
    refused(post(f"/broadcasts/{draft}/cancel"), 422, "validation_error", "`draft`")
    complete = post("/broadcasts", json=body).json()["id"]
    refused(post(f"/broadcasts/{complete}/send", json={"scheduled_at": "next year"}), 422,
            "validation_error", "`scheduled_at`")  # fmt: skip
    refused(client.get(f"/broadcasts/{draft}/recipients"), 422, "missing_required_parameter",
            "`type`")  # fmt: skip
    refused(client.get(f"/broadcasts/{draft}/recipients?type=read"), 422, "validation_error",
            "`type`")  # fmt: skip
    refused(client.get(f"/broadcasts/{draft}/recipients?type=sent&bounce_type=permanent"), 422,
            "validation_error", "`bounce_type`")  # fmt: skip
    refused(client.get(f"/broadcasts/{draft}/recipients?type=sent&limit=0"), 422,
            "validation_error", "limit")  # fmt: skip
    unknown = new_id()
    refused(client.get(f"/broadcasts/{unknown}"), 404, "not_found", "Broadcast not found")
    # Another team's broadcast is as unknown as one that never was.
    with api(setup.live, other_token) as other:
        refused(other.get(f"/broadcasts/{draft}"), 404, "not_found", "Broadcast not found")
        refused(other.delete(f"/broadcasts/{draft}"), 404, "not_found", "Broadcast not found")
        refused(other.post(f"/broadcasts/{draft}/send", json={}), 404, "not_found", "Broadcast")
        assert other.get("/broadcasts").json()["data"] == []
    assert client.get(f"/broadcasts/{draft}/clicked-links").json() == {
        "object": "list", "has_more": False, "data": [],
    }  # fmt: skip
    client.close()


def test_opens_and_clicks_are_counted_per_recipient_and_link(
    setup: Setup, dns_server: AuthoritativeDnsServer
) -> None:
    domain = verified_domain(dns_server, setup.domain)
    resend.Domains.update({"id": domain["id"], "open_tracking": True, "click_tracking": True})
    audience = seed_audience(setup.live, setup.token, 3)
    shop, blog = "https://shop.example/sale", "https://blog.example/post"
    html = f'<html><body><a href="{shop}">Sale</a> <a href="{blog}">Blog</a></body></html>'
    created = resend.Broadcasts.create(
        {"segment_id": audience.segment_id, "from": setup.sender, "subject": "Hi",
         "html": html, "send": True}
    )  # fmt: skip
    wait_until(lambda: broadcast(created["id"])["counts"]["delivered"] == 3, "delivered")
    tracked = {}
    for message in setup.sunk():
        part = parsed(message.content).get_body(("html",))
        assert part is not None
        content = part.get_content()
        base = re.escape(setup.live.base_url)
        clicks = re.findall(rf'href="({base}/t/c/[\w-]+)"', content)
        (pixel,) = re.findall(rf'src="({base}/t/o/[\w-]+)"', content)
        tracked[message.rcpt_tos[0]] = (pixel, clicks)
    ann, bob = member_email(0), member_email(1)
    with httpx.Client() as client:
        for _ in range(2):  # Ann opens twice and clicks the sale twice, then the blog
            client.get(tracked[ann][0])
            client.get(tracked[ann][1][0], follow_redirects=False)
        client.get(tracked[ann][1][1], follow_redirects=False)
        client.get(tracked[bob][1][0], follow_redirects=False)  # Bob clicks, images off
    counts = broadcast(created["id"])["counts"]
    assert (counts["opened"], counts["clicked"]) == (1, 2)  # recipients, not events
    opened = resend.Broadcasts.recipients(created["id"], {"type": "opened"})["data"]
    assert [(row["email"], row["count"]) for row in opened] == [(ann, 2)]
    clicked = {
        row["email"]: row
        for row in resend.Broadcasts.recipients(created["id"], {"type": "clicked"})["data"]
    }
    assert clicked[ann]["count"] == 3
    assert sorted((link["url"], link["clicks"]) for link in clicked[ann]["clicked_links"]) == [
        (blog, 1), (shop, 2),
    ]  # fmt: skip
    links = resend.Broadcasts.clicked_links(created["id"])["data"]
    assert [(link["url"], link["clicks"], link["unique_clicks"]) for link in links] == [
        (shop, 3, 2), (blog, 1, 1),
    ]  # fmt: skip
    first = resend.Broadcasts.clicked_links(created["id"], {"limit": 1})
    assert first["has_more"] and first["data"][0]["url"] == shop
    rest = resend.Broadcasts.clicked_links(created["id"], {"after": first["data"][0]["id"]})
    assert [link["url"] for link in rest["data"]] == [blog]
