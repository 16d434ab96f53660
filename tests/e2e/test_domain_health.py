"""Domain health end to end: a live `postwire serve` delivers a hundred emails from one domain,
then a mailbox provider's complaint (an ARF report over Postwire's STARTTLS listener) puts its
complaint rate at 1%, past the 0.3% of Google's and Yahoo's sender requirements. The team's
webhook endpoint, subscribed to `domain.health_warning`, receives exactly one warning, verified
with svix; a second complaint while the domain is still past the threshold warns no more, nor
does a restart after a SIGKILL."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import resend
from svix.webhooks import Webhook

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, serving, spool_events, verified_domain
from tests.e2e.conftest import wait_until as wait_briefly
from tests.e2e.test_inbound_dsn import report
from tests.e2e.test_metrics_proof import arf, message_of
from tests.ports import free_address
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver
from tests.store_backends import table_rows
from tests.webhook_receiver import WebhookReceiver

VOLUME = 100  # metrics.health.MIN_VOLUME: the least mail a rate is judged on


@pytest.fixture
def webhooks() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp_receiver() -> Iterator[ScriptedSmtpReceiver]:
    receiver = ScriptedSmtpReceiver(ReceiverScript())
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
    smtp_receiver: ScriptedSmtpReceiver,
    postwire_smtp: str,
) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{smtp_receiver.host}:{smtp_receiver.port}"},
        starttls_listen=(postwire_smtp,),
        allow_private_webhooks=True,
        # Judged every second rather than every 30: the test waits for rounds, not a schedule.
        metrics_extra="health_interval_seconds = 1",
    ) as server:
        yield server


def domain_health_records(data_dir: Path) -> list[dict[str, Any]]:
    """The `domain_health` table, read with the `lmdb` package (server stopped)."""
    return [json.loads(raw) for _, raw in table_rows(data_dir, "domain_health")]


def judged_at(domain_id: str, complaint_rate: float) -> bool:
    """Whether a round of evaluation judged the domain at `complaint_rate` (24 hours) or more
    (the API's `health`)."""
    health = dict(resend.Domains.get(domain_id)).get("health")
    if not health:
        return False
    rate = next(
        c["rate"]
        for c in health["checks"]
        if (c["window"], c["metric"]) == ("24h", "complaint_rate")
    )
    return rate >= complaint_rate


def test_crossing_the_complaint_threshold_warns_once(
    live: LiveServer,
    dns_server: AuthoritativeDnsServer,
    smtp_receiver: ScriptedSmtpReceiver,
    postwire_smtp: str,
    webhooks: WebhookReceiver,
) -> None:
    domain = verified_domain(dns_server)
    hook = resend.Webhooks.create(
        {"endpoint": webhooks.url, "events": ["domain.health_warning"]}  # type: ignore[list-item]
    )
    batch = [
        {"from": f"Shop <shop@{DOMAIN}>", "to": f"c{i}@example.org", "subject": "Receipt",
         "text": "Thanks for your order."}
        for i in range(VOLUME)
    ]  # fmt: skip
    ids = [item["id"] for item in resend.Batch.send(batch)["data"]]  # type: ignore[arg-type]

    def delivered() -> int:
        listed = resend.Emails.list({"limit": 100})["data"]
        return sum(1 for e in listed if e["last_event"] == "delivered")

    wait_briefly(lambda: delivered() == VOLUME, "every email delivered", timeout=120)

    def complain(email_id: str, recipient: str) -> None:
        verp = message_of(smtp_receiver, email_id).mail_from
        assert report(postwire_smtp, verp, arf(verp, recipient))[0] == 250

    complain(ids[0], "c0@example.org")
    wait_briefly(lambda: len(webhooks.posts()) >= 1, "the warning posted", timeout=30)
    (post,) = webhooks.posts()
    Webhook(hook["signing_secret"]).verify(post.body, post.headers)
    warning = json.loads(post.body)
    assert warning["type"] == "domain.health_warning"
    data = warning["data"]
    assert (data["id"], data["name"]) == (domain["id"], DOMAIN)
    assert (data["state"], data["previous_state"]) == ("critical", "ok")
    assert {"window": "24h", "metric": "complaint_rate", "rate": 1.0, "threshold": 0.3,
            "volume": VOLUME, "state": "critical"} in data["crossed"]  # fmt: skip
    # The domain's API answer carries the same verdict (a field the SDK passes through).
    health = dict(resend.Domains.get(domain["id"]))["health"]
    assert health["state"] == "critical" and health["since"] <= health["evaluated_at"]
    complaints = {"window": "24h", "metric": "complaint_rate", "rate": 1.0, "volume": VOLUME,
                  "state": "critical", "warning_at": 0.1, "critical_at": 0.3}  # fmt: skip
    assert complaints in health["checks"]
    assert len(health["checks"]) == 4

    # Still past the threshold: a second complaint is judged (the rate doubles) but not warned.
    complain(ids[1], "c1@example.org")
    wait_briefly(lambda: resend.Emails.get(ids[1])["last_event"] == "complained", "complained")
    wait_briefly(lambda: judged_at(domain["id"], 2.0), "a round judging it")
    assert len(webhooks.posts()) == 1

    # The state is kept in the spool: a server killed and started again (whose first round
    # runs as it starts) does not warn again either.
    assert live.stop(signal.SIGKILL) == -signal.SIGKILL
    live.start()
    resend.api_url = live.base_url  # a new port
    time.sleep(3)  # three rounds, the first as it starts (an unchanged verdict is not stored)
    assert len(webhooks.posts()) == 1
    live.stop()

    (record,) = domain_health_records(live.data_dir)
    assert record["state"] == "critical" and record["domain_id"] == domain["id"]
    rates = {(c["window"], c["metric"]): c["rate"] for c in record["checks"]}
    assert rates[("24h", "complaint_rate")] == 2.0
    kinds = [event["type"] for event in spool_events(live.data_dir)]
    assert kinds.count("domain.health_warning") == 1
