"""Domain squatting on a live server with two teams, verification against Knot. Team B adds
`bigcorp-example.test` and never proves it; team A, the real owner, adds it anyway (no 403 that
would also tell A another tenant holds it), publishes its records and verifies. A owns the name:
B's domain is `failed` with a reason, B's webhook gets `domain.updated` (signed, checked with
`svix`), B cannot verify it back, and a third team gets the contract's 403."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from svix.webhooks import Webhook

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, publish_records, serving, wait_until
from tests.webhook_receiver import WebhookReceiver

NAME = "bigcorp-example.test"


@pytest.fixture
def live(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> Iterator[LiveServer]:
    with serving(tmp_path, dns_server, allow_private_webhooks=True) as server:
        yield server


def _team(live: LiveServer, name: str) -> httpx.Client:
    key = live.create_key(name, new_team=name)
    return httpx.Client(
        base_url=live.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def _status(team: httpx.Client, domain_id: str) -> dict[str, Any]:
    answer = team.get(f"/domains/{domain_id}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_an_unverified_claim_blocks_nobody_and_the_verifier_owns_the_name(
    live: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    owner, squatter, third = (_team(live, name) for name in ("Bigcorp", "Squatter", "Third"))
    with WebhookReceiver() as hooks:
        subscription = {"endpoint": hooks.url, "events": ["domain.updated"]}
        hook = squatter.post("/webhooks", json=subscription)
        assert hook.status_code in (200, 201), hook.text
        secret = hook.json()["signing_secret"]

        squatted = squatter.post("/domains", json={"name": NAME})
        assert squatted.status_code == 201, squatted.text
        squatted_id = squatted.json()["id"]
        assert squatter.post(f"/domains/{squatted_id}/verify").status_code == 200

        # The real owner adds the name all the same, and proves it in DNS.
        added = owner.post("/domains", json={"name": NAME})
        assert added.status_code == 201, added.text
        publish_records(dns_server, added.json())
        assert owner.post(f"/domains/{added.json()['id']}/verify").status_code == 200
        owned = added.json()["id"]
        wait_until(lambda: _status(owner, owned)["status"] == "verified", "A's domain verified")

        dropped = _status(squatter, squatted_id)
        assert dropped["status"] == "failed", dropped
        assert dropped["failure_reason"].startswith(f"Another team verified {NAME} first")
        listed = squatter.get("/domains").json()["data"]
        assert [(d["id"], d["status"]) for d in listed] == [(squatted_id, "failed")]

        # B's webhook is told, signed as every webhook is.
        wait_until(lambda: bool(hooks.posts()), "domain.updated to reach B's endpoint")
        post = hooks.posts()[0]
        Webhook(secret).verify(post.body, post.headers)  # raises unless signed with B's secret
        event = json.loads(post.body)
        assert event["type"] == "domain.updated"
        assert event["data"]["id"] == squatted_id and event["data"]["status"] == "failed"
        assert event["data"]["name"] == NAME and event["data"]["records"]
        assert "Another team verified" in event["data"]["failure_reason"]

        # B cannot verify it back, and sends nothing from it.
        assert squatter.post(f"/domains/{squatted_id}/verify").status_code == 200
        assert _status(squatter, squatted_id)["status"] == "failed"
        sent = squatter.post(
            "/emails",
            json={"from": f"ceo@{NAME}", "to": "x@example.org", "subject": "s", "text": "t"},
        )
        assert sent.status_code == 403, sent.text

    # A name verified by another team: the contract's 403, whichever team asks.
    refused = third.post("/domains", json={"name": NAME})
    assert refused.status_code == 403
    assert refused.json() == {
        "statusCode": 403,
        "name": "validation_error",
        "message": f"The `{NAME}` domain has been registered already.",
    }
    assert _status(owner, added.json()["id"])["status"] == "verified"
    assert "failure_reason" not in _status(owner, added.json()["id"])
    assert event["data"]["capabilities"] == {"sending": "enabled", "receiving": "disabled"}
