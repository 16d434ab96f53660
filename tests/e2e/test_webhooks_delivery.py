"""Webhooks end to end: a live `postwire serve` delivers mail to Postfix's smtp-sink and reports
every event to a real HTTP receiver on loopback, each POST verified with `svix` and the
`resend` SDK; killed with SIGKILL while events wait for a retry and restarted, it still
delivers every event (at least once, each with a stable id)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import resend
from svix.webhooks import Webhook

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    serving,
    verified_domain,
    wait_until,
)
from tests.webhook_receiver import Answer, ReceivedPost, WebhookReceiver

EMAILS = 4


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """Fails the first POST of every event with 500, then takes it: every event waits for a
    retry (5 s after its first failure), and the test can kill the server meanwhile."""
    seen: set[str] = set()

    def answer(number: int) -> Answer:
        event_id = receiver.posts()[number].headers["svix-id"]
        first = event_id not in seen
        seen.add(event_id)
        return Answer(status=500 if first else 204)

    receiver = WebhookReceiver(answer)
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def server(tmp_path: Path, dns_server: AuthoritativeDnsServer, sink: str) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        routes={"*": sink},
        allow_private_webhooks=True,
    ) as live:
        yield live


def accepted(posts: list[ReceivedPost]) -> dict[str, dict[str, Any]]:
    """The events a receiver answering 2xx took, by svix-id (the second POST of each)."""
    firsts: set[str] = set()
    taken: dict[str, dict[str, Any]] = {}
    for post in posts:
        event_id = post.headers["svix-id"]
        if event_id in firsts:
            taken[event_id] = json.loads(post.body)
        firsts.add(event_id)
    return taken


def test_events_survive_sigkill_and_arrive_signed(
    server: LiveServer, dns_server: AuthoritativeDnsServer, receiver: WebhookReceiver
) -> None:
    verified_domain(dns_server)
    created = resend.Webhooks.create(
        {"endpoint": receiver.url, "events": ["email.sent", "email.delivered"]}
    )
    secret = created["signing_secret"]
    ids = [
        resend.Emails.send(
            {"from": f"Shop <shop@{DOMAIN}>", "to": f"ann{n}@example.org",
             "subject": f"Order {n}", "text": "Thanks."}
        )["id"]
        for n in range(EMAILS)
    ]  # fmt: skip
    # Every event of every email has had its first (failed) POST: all wait for their retry.
    wait_until(
        lambda: len({p.headers["svix-id"] for p in receiver.posts()}) == 2 * EMAILS, "posted"
    )
    assert accepted(receiver.posts()) == {}
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL

    server.start()
    wait_until(lambda: len(accepted(receiver.posts())) == 2 * EMAILS, "every event taken")
    taken = accepted(receiver.posts())
    kinds = sorted((body["data"]["email_id"], body["type"]) for body in taken.values())
    assert kinds == sorted((i, kind) for i in ids for kind in ("email.sent", "email.delivered"))
    for post in receiver.posts():
        Webhook(secret).verify(post.body, post.headers)
        resend.Webhooks.verify(
            {
                "payload": post.body.decode(),
                "headers": {
                    "id": post.headers["svix-id"],
                    "timestamp": post.headers["svix-timestamp"],
                    "signature": post.headers["svix-signature"],
                },
                "webhook_secret": secret,
            }
        )
    delivered = next(body for body in taken.values() if body["type"] == "email.delivered")
    assert delivered["data"]["from"] == f"Shop <shop@{DOMAIN}>"
    assert delivered["data"]["to"][0].startswith("ann")
