"""`postwire serve` with `insights.rspamd_url` pointing at a real rspamd: emails sent with the
official `resend` SDK are delivered at once to Postfix's smtp-sink, scanned in the background
(from the copy delivery keeps for the insights), and `GET /emails/{id}` shows rspamd's verdict
and heaviest symbols among each one's insights. rspamd asks the tests' Knot DNS, so it
verifies Postwire's DKIM signature against the record the domain published, as a receiver
would; with rspamd gone, the next email says so instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, verified_domain, wait_until, write_config
from tests.peers import require_peer
from tests.rspamd_server import rspamd_binary, running_rspamd
from tests.smtp_sink import dump_directory, running_smtp_sink, smtp_sink_binary, sunk_messages

SENDER_DOMAIN = "rspamd-mail.test"


def email_of(live: LiveServer, api_key: str, email_id: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{live.base_url}/emails/{email_id}",
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    email: dict[str, Any] = answer.json()
    return email


def insights_of(live: LiveServer, api_key: str, email_id: str) -> list[dict[str, Any]]:
    insights: list[dict[str, Any]] = email_of(live, api_key, email_id).get("insights", [])
    return insights


def wait_for_code(live: LiveServer, api_key: str, email_id: str, code: str) -> list[Any]:
    found: list[list[dict[str, Any]]] = []

    def scored() -> bool:
        insights = insights_of(live, api_key, email_id)
        found[:] = [insights]
        return any(i["code"] == code for i in insights)

    wait_until(scored, f"email {email_id} has a {code} insight", timeout=60)
    return found[0]


def params(subject: str, to: str = "bob@example.org") -> resend.Emails.SendParams:
    return {
        "from": f"Acme News <news@{SENDER_DOMAIN}>",
        "to": [to],
        "subject": subject,
        "html": '<p>You won!</p><p><a href="https://bit.ly/3xYzAbc">Claim it now</a></p>',
    }


def send(subject: str) -> str:
    return str(resend.Emails.send(params(subject))["id"])


def test_insights_show_rspamds_verdict(dns_server: AuthoritativeDnsServer, tmp_path: Path) -> None:
    require_peer(rspamd_binary(), "rspamd", "rspamd")
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with (
        dump_directory() as sink_dir,
        running_rspamd(nameserver=dns_server.nameserver) as rspamd,
        running_smtp_sink(sink_dir) as (sink_host, sink_port),
    ):
        live = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
        # A receiver that accepts at once: most emails are delivered before the insights
        # service gets to them, and it scans the copy the delivery's commit kept.
        write_config(
            live.config_path,
            live.data_dir,
            nameservers=(dns_server.nameserver,),
            routes={"example.org": f"{sink_host}:{sink_port}"},
        )
        with live.config_path.open("a") as config:
            config.write(f'\n[insights]\nrspamd_url = "{rspamd.url}"\n')
        live.start()
        try:
            resend.api_url = live.base_url
            resend.api_key = api_key = live.create_key("admin")
            verified_domain(dns_server, SENDER_DOMAIN)
            dns_server.publish(f"_dmarc.{SENDER_DOMAIN}", "TXT", "v=DMARC1; p=quarantine")

            email_id = send("YOU WON A PRIZE")
            insights = wait_for_code(live, api_key, email_id, "rspamd_score")
            by_symbol = {
                i["message"].split(" ")[0]: i for i in insights if i["code"] == "rspamd_symbol"
            }
            (summary,) = [i for i in insights if i["code"] == "rspamd_score"]
            assert summary["message"].startswith("rspamd scored "), summary
            assert summary["message"].endswith(" of 15 (no action)"), summary
            assert summary["severity"] == "ok"
            # rspamd verified Postwire's signature with the key Knot serves, and DMARC passes.
            assert by_symbol["R_DKIM_ALLOW"]["severity"] == "ok", insights
            assert by_symbol["DMARC_POLICY_ALLOW"]["fix"] == ""
            caps = by_symbol["SUBJ_ALL_CAPS"]
            assert caps["severity"] == "warning"
            assert caps["message"].endswith("The subject is written in capital letters.")
            assert caps["fix"] == "Write the subject in normal sentence case."
            assert {"code", "severity", "message", "fix"} == set(caps)

            # A batch, delivered at once: every email still gets rspamd's verdict.
            batch = [params(f"Offer {n}", f"reader{n}@example.org") for n in range(10)]
            ids = [str(sent["id"]) for sent in resend.Batch.send(batch)["data"]]
            for batch_id in ids:
                insights = wait_for_code(live, api_key, batch_id, "rspamd_score")
                assert "rspamd_skipped" not in {i["code"] for i in insights}
            wait_until(
                lambda: all(email_of(live, api_key, i)["last_event"] == "delivered" for i in ids),
                "every email delivered",
            )
            assert len(sunk_messages(sink_dir)) == 1 + len(ids)

            rspamd.stop()
            later = send("A quieter subject")
            insights = wait_for_code(live, api_key, later, "rspamd_unavailable")
            (unavailable,) = [i for i in insights if i["code"].startswith("rspamd_")]
            assert unavailable["severity"] == "info"
            assert unavailable["message"].startswith("rspamd did not score this email: ")
            assert rspamd.url not in unavailable["message"]  # the operator's, not the team's
        finally:
            resend.api_key = None
            if live.process is not None:
                live.stop()
