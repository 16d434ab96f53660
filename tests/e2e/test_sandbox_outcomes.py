"""The sandbox's test addresses, each sent to with the `resend` SDK: `delivered@`, `bounced@`,
`complained@`, `delayed@` and `suppressed@` at the sandbox domain give the outcome their name
says, with the events a real outcome gives (posted, signed, to a real webhook receiver), the
email's status, the suppression list and the team's metrics. Nothing leaves the machine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import resend
from svix.webhooks import Webhook

from tests.e2e.conftest import wait_until
from tests.e2e.test_sandbox import SANDBOX_DOMAIN, SandboxServer, postwire
from tests.network_traps import OutboundTraps, outbound_traps
from tests.processes import stop_process
from tests.webhook_receiver import WebhookReceiver

EVENTS: Any = [
    "email.sent", "email.delivered", "email.bounced", "email.complained",
    "email.delivery_delayed",
]  # fmt: skip


class Sandbox:
    """A sandbox server, a webhook receiver subscribed to every outcome, and an admin key."""

    def __init__(self, server: SandboxServer, traps: OutboundTraps, receiver: WebhookReceiver):
        self.server, self.traps, self.receiver = server, traps, receiver
        self.token = ""
        self.secret = ""

    def send(self, local_part: str) -> str:
        """Send one email to `local_part`@ the sandbox domain; its id."""
        resend.api_url, resend.api_key = self.server.base_url, self.token
        sent = resend.Emails.send(
            {"from": f"Shop <shop@{SANDBOX_DOMAIN}>", "to": f"{local_part}@{SANDBOX_DOMAIN}",
             "subject": f"To {local_part}", "text": "Hello."}
        )  # fmt: skip
        return str(sent["id"])

    def last_event(self, email_id: str) -> str:
        resend.api_url, resend.api_key = self.server.base_url, self.token
        return str(resend.Emails.get(email_id)["last_event"])

    def webhook_events(self, email_id: str) -> list[dict[str, Any]]:
        """The events of `email_id` the receiver took, in the order posted, each verified."""
        bodies = []
        for post in self.receiver.posts():
            Webhook(self.secret).verify(post.body, post.headers)
            body = json.loads(post.body)
            if body["data"]["email_id"] == email_id:
                bodies.append(body)
        return bodies

    def suppression(self, address: str) -> dict[str, Any] | None:
        with httpx.Client(base_url=self.server.base_url) as api:
            listed = api.get("/suppressions", headers={"Authorization": f"Bearer {self.token}"})
        return next((s for s in listed.json()["data"] if s["email"] == address), None)

    def held(self) -> list[str]:
        with httpx.Client(base_url=self.server.base_url) as api:
            answer = api.get("/sandbox/messages", headers={"Authorization": f"Bearer {self.token}"})
        return [message["id"] for message in answer.json()["data"]]

    def totals(self, email_id: str | None = None) -> dict[str, int]:
        """The team's metrics, of one email if given."""
        resend.api_url, resend.api_key = self.server.base_url, self.token
        which: Any = {} if email_id is None else {"email_id": [email_id]}
        return dict(resend.Emails.metrics(which)["totals"])


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    directory = tmp_path_factory.mktemp("sandbox")
    with outbound_traps() as traps, WebhookReceiver() as receiver:
        server = SandboxServer(
            directory, traps, {"POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true"}
        )
        try:
            server.wait_ready()
            here = Sandbox(server, traps, receiver)
            here.token = postwire("keys", "create", "--name", "me", cwd=directory).decode().strip()
            resend.api_url, resend.api_key = server.base_url, here.token
            created = resend.Webhooks.create({"endpoint": receiver.url, "events": EVENTS})
            here.secret = created["signing_secret"]
            yield here
            assert traps.dns_queries() == 0, "no DNS query for any recipient"
            assert traps.smtp_connections() == 0, "no SMTP connection for any recipient"
        finally:
            stop_process(server.process)
            resend.api_key = None


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """The events' types, sorted (webhooks are posted in no set order, and the events of one
    commit share their time)."""
    return sorted(event["type"] for event in events)


def test_delivered_is_held_and_delivered(sandbox: Sandbox) -> None:
    email_id = sandbox.send("delivered")
    wait_until(lambda: "email.delivered" in kinds(sandbox.webhook_events(email_id)), "delivered")
    assert sandbox.last_event(email_id) == "delivered"
    assert email_id in sandbox.held()
    assert sandbox.suppression(f"delivered@{SANDBOX_DOMAIN}") is None
    assert sandbox.totals(email_id)["delivered"] == 1


def test_bounced_bounces_for_good_and_is_suppressed(sandbox: Sandbox) -> None:
    address = f"bounced+signup@{SANDBOX_DOMAIN}"  # a label, as Resend's addresses take
    email_id = sandbox.send("bounced+signup")
    wait_until(lambda: "email.bounced" in kinds(sandbox.webhook_events(email_id)), "bounced")
    events = sandbox.webhook_events(email_id)
    assert kinds(events) == ["email.bounced", "email.sent"]
    (bounced,) = [event for event in events if event["type"] == "email.bounced"]
    bounce = bounced["data"]["bounce"]
    assert (bounce["type"], bounce["subType"]) == ("Permanent", "NoEmail")
    assert bounce["diagnosticCode"][0].startswith("smtp; 550 5.1.1")
    assert sandbox.last_event(email_id) == "bounced"
    assert email_id not in sandbox.held()
    suppression = sandbox.suppression(address)
    assert suppression is not None and suppression["origin"] == "bounce"
    assert sandbox.totals(email_id)["bounced"] == 1


def test_complained_is_delivered_then_reported(sandbox: Sandbox) -> None:
    address = f"complained@{SANDBOX_DOMAIN}"
    email_id = sandbox.send("complained")
    wait_until(lambda: "email.complained" in kinds(sandbox.webhook_events(email_id)), "complaint")
    events = sandbox.webhook_events(email_id)
    assert kinds(events) == ["email.complained", "email.delivered", "email.sent"]
    (delivered,) = [event for event in events if event["type"] == "email.delivered"]
    (complained,) = [event for event in events if event["type"] == "email.complained"]
    assert complained["data"]["to"] == [address]
    assert complained["created_at"] >= delivered["created_at"]
    assert sandbox.last_event(email_id) == "complained"
    assert email_id in sandbox.held()
    suppression = sandbox.suppression(address)
    assert suppression is not None and suppression["origin"] == "complaint"
    totals = sandbox.totals(email_id)
    assert (totals["delivered"], totals["complained"]) == (1, 1)


def test_delayed_is_deferred_and_kept_for_a_retry(sandbox: Sandbox) -> None:
    email_id = sandbox.send("delayed")
    wait_until(
        lambda: "email.delivery_delayed" in kinds(sandbox.webhook_events(email_id)), "deferred"
    )
    assert kinds(sandbox.webhook_events(email_id)) == ["email.delivery_delayed", "email.sent"]
    assert sandbox.last_event(email_id) == "delivery_delayed"
    assert email_id not in sandbox.held()
    assert sandbox.suppression(f"delayed@{SANDBOX_DOMAIN}") is None
    resend.api_url, resend.api_key = sandbox.server.base_url, sandbox.token
    with httpx.Client(base_url=sandbox.server.base_url) as api:
        email = api.get(
            f"/emails/{email_id}", headers={"Authorization": f"Bearer {sandbox.token}"}
        ).json()
    assert "451 4.7.1" in json.dumps(email), email
    assert sandbox.totals(email_id)["delivery_delayed"] == 1


def test_suppressed_is_skipped_like_any_suppressed_address(sandbox: Sandbox) -> None:
    address = f"suppressed@{SANDBOX_DOMAIN}"
    suppression = sandbox.suppression(address)
    assert suppression is not None and suppression["origin"] == "manual"
    before = sandbox.totals()["suppressed"]
    email_id = sandbox.send("suppressed")
    wait_until(lambda: sandbox.last_event(email_id) == "suppressed", "suppressed")
    assert email_id not in sandbox.held()
    assert sandbox.webhook_events(email_id) == []  # skipped before it was ever sent
    # Counted for the team and its domain, as every suppressed recipient is (not per email).
    assert sandbox.totals()["suppressed"] == before + 1
