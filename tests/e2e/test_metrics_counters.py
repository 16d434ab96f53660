"""The metrics' counters against the events a live `postwire serve` produced: mail delivered,
bounced (the receiver refuses one address), opened and clicked through the tracking links,
and a SIGKILL in the middle of delivering. Read afterwards with the independent `lmdb`
package, every counter equals the events of its kind, for the team and for the sending
domain, because each count commits with its event."""

from __future__ import annotations

import email
import email.policy
import re
import signal
from collections import Counter
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest
import resend

from postwire.metrics.counters import event_counter_names
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    serving,
    spool_events,
    verified_domain,
    wait_until,
)
from tests.ports import free_address
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver
from tests.store_backends import table_rows

REFUSED = "nobody@example.org"
LINK = "https://shop.example/orders/7"
HTML = f'<p>Your order shipped.</p><a href="{LINK}">Track it</a>'


@pytest.fixture
def receiver() -> Iterator[ScriptedSmtpReceiver]:
    """Answers the end of DATA after a second (delivery is in progress a while, for the kill)
    and refuses one address for good."""
    script = ReceiverScript(
        refuse_recipients={REFUSED: "550 5.1.1 no such user"}, delay_data_end_seconds=1.0
    )
    receiver = ScriptedSmtpReceiver(script)
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def metrics_server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> Iterator[LiveServer]:
    # A fixed port: the tracking links' base must be where the server listens after a restart.
    listen = free_address()
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{receiver.host}:{receiver.port}"},
        api_listen=listen,
        public_url=f"http://{listen}",
    ) as live:
        yield live


def spool_counters(data_dir: Path) -> dict[str, int]:
    """The `counters` table, read with the `lmdb` package (server stopped)."""
    return {key.decode(): int(value) for key, value in table_rows(data_dir, "counters")}


def sums(counters: dict[str, int], pattern: str) -> Counter[str]:
    """Counter name -> the sum of its counts over the keys matching `pattern` (whose last
    group is the name)."""
    totals: Counter[str] = Counter()
    for key, value in counters.items():
        if match := re.fullmatch(pattern, key):
            totals[match.group(match.lastindex or 0)] += value
    return totals


def last_event(email_id: str) -> str:
    return str(resend.Emails.get(email_id)["last_event"])


def test_counters_equal_the_events_across_a_kill(
    metrics_server: LiveServer, dns_server: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> None:
    domain = verified_domain(dns_server)
    resend.Domains.update({"id": domain["id"], "open_tracking": True, "click_tracking": True})
    sender = f"Shop <shop@{DOMAIN}>"
    addresses = [f"r{i}@example.org" for i in range(6)] + [REFUSED]
    ids = [
        resend.Emails.send(
            {"from": sender, "to": to, "subject": "Shipped", "html": HTML, "text": "Shipped"}
        )["id"]
        for to in addresses
    ]
    wait_until(lambda: receiver.transactions_seen >= 1, "delivery has begun")
    assert metrics_server.stop(signal.SIGKILL) == -signal.SIGKILL
    assert len(receiver.received()) < len(addresses), "killed before everything was delivered"
    receiver.script.delay_data_end_seconds = 0
    metrics_server.start()
    resend.api_url = metrics_server.base_url
    wait_until(
        lambda: all(last_event(i) in ("delivered", "bounced") for i in ids), "every email ended"
    )
    assert last_event(ids[-1]) == "bounced"

    # Open the first email twice and click its link once (no API key: the recipient's view).
    first = next(m for m in receiver.received() if b"r0@example.org" in m.content)
    parsed = email.message_from_bytes(first.content, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    html_part = parsed.get_body(("html",))
    assert html_part is not None
    html = str(html_part.get_content())
    base = re.escape(metrics_server.base_url)
    pixel = re.findall(rf'({base}/t/o/[\w-]+)"', html)[0]
    click = re.findall(rf'({base}/t/c/[\w-]+)"', html)[0]
    with httpx.Client() as client:
        assert client.get(pixel).status_code == 200
        assert client.get(pixel).status_code == 200
        assert client.get(click, follow_redirects=False).status_code == 302

    # The REST API reads the same counters (compared with the events below).
    api_totals = dict(resend.Emails.metrics({})["totals"])
    by_hour = resend.Emails.metrics(
        {
            "granularity": "hourly",
            "dimensions": ["period", "domain"],
            "metrics": ["sent", "bounce_rate"],
        }
    )
    by_day = resend.Emails.metrics(
        {"timezone": "America/New_York", "dimensions": ["period"], "domain_id": [domain["id"]]}
    )
    with pytest.raises(resend.exceptions.ResendError, match="granularity"):
        resend.Emails.metrics({"granularity": "yearly"})  # type: ignore[arg-type]
    with pytest.raises(resend.exceptions.ResendError, match="domain_id"):
        resend.Emails.metrics({"domain_id": ["0190a000-0000-7000-8000-0000000000d9"]})
    metrics_server.stop()

    events = spool_events(metrics_server.data_dir)
    expected: Counter[str] = Counter()
    for event in events:
        expected.update(event_counter_names(event["type"], event["data"]))
    assert expected["delivered"] >= 6 and expected["bounced"] == 1
    assert expected["opened"] == 2 and expected["clicked"] == 1

    counters = spool_counters(metrics_server.data_dir)
    team = events[0]["team_id"]
    by_team = sums(counters, rf"metrics/{team}/h/\d+/(\w+)")
    by_team_day = sums(counters, rf"metrics/{team}/d/\d+/(\w+)")
    by_domain = sums(counters, rf"metrics/{team}/domain/{domain['id']}/h/\d+/(\w+)")
    plain = {name: count for name, count in by_team.items() if not name.startswith("unique_")}
    assert plain == {k: v for k, v in expected.items() if v}, (plain, expected)
    assert by_team == by_team_day == by_domain
    assert by_team["unique_opened"] == 1 and by_team["unique_clicked"] == 1
    assert by_team["bounced_permanent"] == 1

    assert {name: api_totals[name] for name in by_team} == dict(by_team)
    assert api_totals["received"] == 0  # not counted (documented)
    assert api_totals["bounce_rate"] == round(100 / (by_team["delivered"] + 1), 2)
    hours = [row for row in by_hour["data"] if row["sent"]]
    assert sum(int(row["sent"]) for row in hours) == by_team["sent"]
    assert {row["domain_name"] for row in hours} == {DOMAIN}
    assert set(by_hour["totals"]) == {"sent", "bounce_rate"}
    assert len(by_day["data"]) == 7 and by_day["granularity"] == "daily"
    assert sum(int(row["delivered"]) for row in by_day["data"]) == by_team["delivered"]
