"""The `insights` field of `GET /emails/{id}`, read through the official `resend` SDK and httpx
from a live `postwire serve` whose DNS is a real Knot server: absent until the insights
service has computed them, then the crafted email's findings, each in the documented shape;
none with insights off; and every email accepted just before a kill -9 gets them after. The
first test shares the module's server in a team of its own; the others need a server of their
own (another setting, a kill)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    serving,
    verified_domain,
    wait_until,
)

SEVERITIES = {"error", "warning", "info", "ok"}


def test_insights_of_an_email_through_the_sdk(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    # The recipient's domain has no MX: delivery keeps retrying, so the message stays queued.
    domain = verified_domain(dns_server, "insights-sdk.test")["name"]
    sent = resend.Emails.send(
        {
            "from": f"News <news@{domain}>",
            "to": ["abuse@nowhere.test"],
            "subject": "Autumn offers",
            "html": (
                "<p>Our autumn offers on every plant in the catalogue, this week only.</p>"
                '<p><a href="https://tinyurl.com/autumn">See them</a></p>'
            ),
        }
    )
    email: dict[str, Any] = {}

    def computed() -> bool:
        email.update(resend.Emails.get(sent["id"]))
        return "insights" in email

    wait_until(computed, "the email's insights are computed", timeout=30)
    insights = email["insights"]
    assert all(set(i) == {"code", "severity", "message", "fix"} for i in insights)
    assert all(i["severity"] in SEVERITIES and i["message"] for i in insights)
    by_code = {i["code"]: i for i in insights}
    # No DMARC record published by verified_domain; the domain's own records are there.
    assert {"dkim_aligned", "spf_aligned", "dmarc_missing"} <= set(by_code)
    assert {"shortener_link", "role_address", "text_part_matches"} <= set(by_code)
    # The API's public_url is http://127.0.0.1: the tracking links it would put in mail
    # are unreachable, but this domain tracks nothing.
    assert "tracking_unreachable" not in by_code
    assert by_code["dmarc_missing"]["severity"] == "error"
    assert by_code["dmarc_missing"]["fix"].startswith("Publish a TXT record at _dmarc.")
    # Authentication first, worst first within it.
    assert insights[0]["code"] == "dmarc_missing"

    # The same JSON over plain HTTP; the list leaves insights out like html and text.
    headers = {"Authorization": f"Bearer {resend.api_key}"}
    with httpx.Client(base_url=team_server.base_url, headers=headers) as client:
        assert client.get(f"/emails/{sent['id']}").json()["insights"] == insights
        listed = client.get("/emails").json()["data"][0]
        assert listed["id"] == sent["id"] and "insights" not in listed


def test_no_insights_when_they_are_off(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> None:
    with serving(tmp_path, dns_server, tables="\n[insights]\nenabled = false\n"):
        verified_domain(dns_server)
        sent = resend.Emails.send(
            {"from": f"news@{DOMAIN}", "to": ["ann@nowhere.test"], "subject": "S", "text": "T"}
        )
        # Nothing shows that a service which does not run has not run: this waits out eight
        # of the rounds it would take (it looks for new emails every 0.25 s).
        time.sleep(2)
        assert "insights" not in resend.Emails.get(sent["id"])


def test_insights_of_emails_accepted_before_a_kill_9(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    with serving(tmp_path, dns_server) as live:
        verified_domain(dns_server)
        batch = [
            {"from": f"news@{DOMAIN}", "to": [f"r{i}@nowhere.test"], "subject": "S", "text": "T"}
            for i in range(50)
        ]
        ids = [sent["id"] for sent in resend.Batch.send(batch)["data"]]
        live.stop(signal.SIGKILL)
        live.start()
        resend.api_url = live.base_url

        def all_computed() -> bool:
            return all("insights" in resend.Emails.get(email_id) for email_id in ids)

        wait_until(all_computed, "every email accepted before the kill has insights", timeout=60)
