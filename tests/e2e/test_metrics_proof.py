"""Every dimension of the metrics against the events a live `postwire serve` produced: tagged
transactional mail and a broadcast delivered to a scripted receiver, a hard bounce (refused
live), a soft bounce and a delay (DSNs), a complaint (an ARF report), opens, clicks, a one-click
unsubscribe and a send refused because its address is suppressed, with a SIGKILL while
delivering. Read afterwards with the independent `lmdb` package, the counts of the team, its
domain, the broadcast, each tag (hour and day) and the recipient domain equal what the events
and those actions add up to, and `GET /emails/metrics` answers the same numbers."""

from __future__ import annotations

import email
import email.policy
import json
import re
import signal
from collections import Counter
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest
import resend

from postwire.metrics.counters import RECIPIENT_DOMAIN_COUNTS, event_counter_names
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, serving, spool_events, verified_domain
from tests.e2e.conftest import wait_until as wait_briefly
from tests.e2e.test_inbound_dsn import report
from tests.e2e.test_metrics_counters import spool_counters, sums
from tests.ports import free_address
from tests.smtp_receiver import ReceivedMessage, ReceiverScript, ScriptedSmtpReceiver
from tests.store_backends import table_rows

REFUSED = "gone@example.org"
LINK = "https://shop.example/orders/7"
RECEIPT = [{"name": "kind", "value": "receipt"}, {"name": "shop", "value": "eu"}]
NEWS = [{"name": "kind", "value": "news"}]
SAMPLES = Path(__file__).parent.parent / "data" / "inbound"
SAMPLE_VERP = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test"


def wait_until(condition: Any, what: str) -> None:
    wait_briefly(condition, what, timeout=90.0)


@pytest.fixture
def receiver() -> Iterator[ScriptedSmtpReceiver]:
    """Refuses one address for good; answers the end of DATA after a second at first, so that
    delivery is in progress a while for the kill."""
    script = ReceiverScript(
        refuse_recipients={REFUSED: "550 5.1.1 no such user"}, delay_data_end_seconds=1.0
    )
    receiver = ScriptedSmtpReceiver(script)
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def postwire_smtp() -> str:
    return free_address()


@pytest.fixture
def live(
    tmp_path: Path,
    dns_server: AuthoritativeDnsServer,
    receiver: ScriptedSmtpReceiver,
    postwire_smtp: str,
) -> Iterator[LiveServer]:
    api = free_address()  # fixed: the links in mail must still lead here after the restart
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{receiver.host}:{receiver.port}"},
        starttls_listen=(postwire_smtp,),
        api_listen=api,
        public_url=f"http://{api}",
    ) as server:
        yield server


def send(to: str, tags: list[dict[str, str]]) -> str:
    html = f'<p>Your order shipped.</p><a href="{LINK}">Track it</a>'
    params: dict[str, Any] = {"from": f"Shop <shop@{DOMAIN}>", "to": to, "subject": "Shipped",
                              "html": html, "text": "Shipped", "tags": tags}  # fmt: skip
    return str(resend.Emails.send(params)["id"])  # type: ignore[arg-type]


def last_event(email_id: str) -> str:
    return str(resend.Emails.get(email_id)["last_event"])


def message_of(receiver: ScriptedSmtpReceiver, email_id: str) -> ReceivedMessage:
    """The message of `email_id` as the receiver took it (its VERP return path names it)."""
    return next(m for m in receiver.received() if f"bounces+{email_id}-" in m.mail_from)


def html_of(message: ReceivedMessage) -> str:
    parsed = email.message_from_bytes(message.content, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    part = parsed.get_body(("html",))
    assert part is not None
    return str(part.get_content())


def dsn(verp: str, recipient: str, action: str, status: str) -> bytes:
    """A remote relay's DSN about `recipient` of the message sent from `verp`."""
    sample = (SAMPLES / "postfix-delayed.eml").read_bytes().decode()
    sample = sample.replace(SAMPLE_VERP, verp).replace("slow@example.net", recipient)
    sample = sample.replace("Action: delayed", f"Action: {action}")
    sample = sample.replace("Status: 4.4.1", f"Status: {status}")
    return sample.replace("\n", "\r\n").encode()


def arf(verp: str, recipient: str) -> bytes:
    """A mailbox provider's complaint (ARF) about the message sent from `verp` to `recipient`."""
    sample = (SAMPLES / "arf-abuse.eml").read_bytes().decode()
    sample = sample.replace(SAMPLE_VERP, verp).replace("angry@mailbox.example", recipient)
    return sample.replace("sender.test", DOMAIN).replace("\n", "\r\n").encode()


def spool_emails(data_dir: Path) -> dict[str, dict[str, Any]]:
    """The email records by id, read with the `lmdb` package (server stopped)."""
    records = [json.loads(raw) for _, raw in table_rows(data_dir, "emails")]
    return {record["id"]: record for record in records}


def scopes_of(record: dict[str, Any]) -> list[str]:
    """The counter scopes an email's events add to (as `metrics.counters` lays them out)."""
    scopes = ["", f"domain/{record['domain_id']}/"]
    if record.get("broadcast_id"):
        scopes.append(f"broadcast/{record['broadcast_id']}/")
    scopes += [f"tag/{tag['name']}:{tag['value']}/" for tag in record["tags"]]
    return scopes


def test_every_dimension_counts_what_happened_across_a_kill(
    live: LiveServer,
    dns_server: AuthoritativeDnsServer,
    receiver: ScriptedSmtpReceiver,
    postwire_smtp: str,
) -> None:
    domain = verified_domain(dns_server)
    resend.Domains.update({"id": domain["id"], "open_tracking": True, "click_tracking": True})
    receipts = [send(f"r{i}@example.org", RECEIPT) for i in range(5)]
    news = [send(f"n{i}@example.org", NEWS) for i in range(2)]
    refused = send(REFUSED, RECEIPT)
    segment = resend.Segments.create({"name": "Readers"})
    for address in ("ann@example.org", "bob@example.org"):
        resend.Contacts.create({"email": address, "segments": [{"id": segment["id"]}]})
    broadcast = resend.Broadcasts.create({
        "segment_id": segment["id"], "from": f"Shop News <news@{DOMAIN}>", "subject": "News",
        "html": '<p>News</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>', "send": True,
    })  # fmt: skip

    wait_until(lambda: receiver.transactions_seen >= 1, "delivery has begun")
    assert live.stop(signal.SIGKILL) == -signal.SIGKILL
    receiver.script.delay_data_end_seconds = 0
    live.start()
    resend.api_url = live.base_url
    transactional = [*receipts, *news, refused]
    wait_until(
        lambda: all(last_event(i) in ("delivered", "bounced") for i in transactional),
        "every email ended",
    )
    assert last_event(refused) == "bounced"
    broadcast_emails = [
        e["id"] for e in resend.Emails.list({"limit": 100})["data"] if e["id"] not in transactional
    ]
    assert len(broadcast_emails) == 2
    wait_until(
        lambda: all(last_event(i) == "delivered" for i in broadcast_emails), "the broadcast sent"
    )

    # Engagement: r0's email opened twice and clicked; ann's broadcast email opened.
    base = re.escape(live.base_url)
    html = html_of(message_of(receiver, receipts[0]))
    pixel, click = re.findall(rf'({base}/t/o/[\w-]+)"', html)[0], re.findall(
        rf'({base}/t/c/[\w-]+)"', html)[0]  # fmt: skip
    ann_message = next(m for m in receiver.received() if m.rcpt_tos == ["ann@example.org"])
    ann_pixel = re.findall(rf'({base}/t/o/[\w-]+)"', html_of(ann_message))[0]
    with httpx.Client() as client:
        for url in (pixel, pixel, ann_pixel):
            assert client.get(url).status_code == 200
        assert client.get(click, follow_redirects=False).status_code == 302
        # Ann unsubscribes with one click (RFC 8058), as her mailbox provider would.
        parsed = email.message_from_bytes(ann_message.content, policy=email.policy.default)
        found = re.search(r"<(http://[^>]+/u/[\w-]+)>", str(parsed["List-Unsubscribe"]))
        assert found is not None
        answer = client.post(found[1], data={"List-Unsubscribe": "One-Click"})
        assert answer.status_code == 200, answer.text

    # Reports: r1's relay gives up (soft bounce), r2's is still trying, r3 complains.
    reports = [
        (receipts[1], dsn, ("r1@example.org", "failed", "4.4.7")),
        (receipts[2], dsn, ("r2@example.org", "delayed", "4.4.1")),
    ]
    for email_id, make, (recipient, action, status) in reports:
        verp = message_of(receiver, email_id).mail_from
        assert report(postwire_smtp, verp, make(verp, recipient, action, status))[0] == 250
    verp = message_of(receiver, receipts[3]).mail_from
    assert report(postwire_smtp, verp, arf(verp, "r3@example.org"))[0] == 250
    wait_until(lambda: last_event(receipts[1]) == "bounced", "the soft bounce applied")
    wait_until(lambda: last_event(receipts[3]) == "complained", "the complaint applied")

    # The hard bounce put its address on the suppression list: the next send is refused.
    suppressed = send(REFUSED, RECEIPT)
    wait_until(lambda: last_event(suppressed) == "suppressed", "the send refused")

    # The REST API, before the server stops (compared with the counters below).
    api = {
        "team": resend.Emails.metrics({})["totals"],
        "broadcast": resend.Emails.metrics({"broadcast_id": [broadcast["id"]]})["totals"],
        "tag": resend.Emails.metrics({"tag": "kind:receipt"})["totals"],  # type: ignore[typeddict-unknown-key]
        "email": resend.Emails.metrics({"email_id": [receipts[0]]})["totals"],
    }
    by_tag = resend.Emails.metrics({"dimensions": ["tag"], "metrics": ["sent", "delivered"]})
    by_broadcast = resend.Emails.metrics({"dimensions": ["broadcast"], "metrics": ["sent"]})
    with pytest.raises(resend.exceptions.ResendError, match="not per combination"):
        resend.Emails.metrics({"domain_id": [domain["id"]], "tag": "kind:news"})  # type: ignore[typeddict-unknown-key]
    live.stop()

    # What the events and the other actions add up to, scope by scope.
    events = spool_events(live.data_dir)
    emails = spool_emails(live.data_dir)
    team = events[0]["team_id"]
    expected: dict[str, Counter[str]] = {}
    by_recipient_domain: Counter[str] = Counter()
    engaged: set[tuple[str, str]] = set()
    for event in sorted(events, key=lambda e: e["id"]):
        names = list(event_counter_names(event["type"], event["data"]))
        if not names:
            continue
        if names[0] in ("opened", "clicked") and (event["email_id"], names[0]) not in engaged:
            engaged.add((event["email_id"], names[0]))
            names.append(f"unique_{names[0]}")
        for scope in scopes_of(emails[event["email_id"]]):
            expected.setdefault(scope, Counter()).update(names)
        if str(event["data"].get("to", "")).endswith("@example.org"):
            by_recipient_domain.update(n for n in names if n in RECIPIENT_DOMAIN_COUNTS)
    ann_email = next(i for i in broadcast_emails if emails[i]["to"] == ["ann@example.org"])
    for scope in scopes_of(emails[ann_email]):
        expected[scope]["unsubscribed"] += 1
    for scope in scopes_of(emails[suppressed]):
        expected[scope]["suppressed"] += 1

    everything = expected[""]
    assert everything["delivered"] >= 8 and everything["bounced_permanent"] == 1
    assert everything["bounced_transient"] == 1 and everything["delivery_delayed"] >= 1
    assert everything["complained"] == 1 and everything["opened"] == 3
    assert everything["unique_opened"] == 2 and everything["clicked"] == 1
    assert set(expected) == {
        "", f"domain/{domain['id']}/", f"broadcast/{broadcast['id']}/", "tag/kind:receipt/",
        "tag/shop:eu/", "tag/kind:news/",
    }  # fmt: skip

    counters = spool_counters(live.data_dir)
    for scope, counts in expected.items():
        hours = sums(counters, rf"metrics/{team}/{re.escape(scope)}h/\d+/(\w+)")
        days = sums(counters, rf"metrics/{team}/{re.escape(scope)}d/\d+/(\w+)")
        assert hours == days == +counts, (scope, hours, counts)
    assert sums(counters, r"rcpt/example\.org/h/\d+/(\w+)") == by_recipient_domain
    # The tags counted are the team's two kinds and one shop (bounded, none "other").
    assert {k.rsplit("/", 1)[1] for k in counters if k.startswith(f"metrics/{team}/tagset/")} == {
        "kind:receipt", "kind:news", "shop:eu",
    }  # fmt: skip

    for name, scope in (("team", ""), ("broadcast", f"broadcast/{broadcast['id']}/"),
                        ("tag", "tag/kind:receipt/")):  # fmt: skip
        assert {n: api[name][n] for n in expected[scope]} == dict(expected[scope]), name
    assert api["team"]["received"] == 0
    assert api["email"]["opened"] == 2 and api["email"]["unique_clicked"] == 1
    rows = {row["tag"]: row for row in by_tag["data"]}
    assert rows["kind:receipt"]["sent"] == expected["tag/kind:receipt/"]["sent"]
    assert rows["kind:news"]["delivered"] == expected["tag/kind:news/"]["delivered"]
    assert "other" not in rows
    (row,) = by_broadcast["data"]
    assert row["broadcast_id"] == broadcast["id"]
    assert row["sent"] == expected[f"broadcast/{broadcast['id']}/"]["sent"] == 2
