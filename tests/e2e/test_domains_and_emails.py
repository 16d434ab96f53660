"""Domains verified against a real DNS server, then email sent through the official SDK.

The server runs as `postwire serve` in a subprocess; its `dns.nameservers` point at a Knot DNS
server on loopback where the tests publish (and withdraw) the records Postwire asks for. Tests
that neither kill nor restart it share one server, each in a team of its own with domain names
of its own (the first team to verify a name owns it).
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dkim
import httpx
import lmdb
import lz4.block
import pytest
import resend
import resend.exceptions

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    fqdn,
    publish_records,
    verified_domain,
    wait_for_status,
    wait_until,
)


def test_domain_lifecycle_follows_dns(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    name = "lifecycle.test"
    created = resend.Domains.create({"name": name})
    assert created["status"] == "not_started"
    kinds = {(r["record"], r["type"]) for r in created["records"]}
    assert {("DKIM", "TXT"), ("SPF", "TXT"), ("SPF", "MX")} <= kinds
    assert all(r["status"] == "not_started" for r in created["records"])

    resend.Domains.verify(created["id"])
    assert wait_for_status(created["id"], "pending")["records"]

    publish_records(dns_server, created)
    resend.Domains.verify(created["id"])
    domain = wait_for_status(created["id"], "verified")
    assert all(r["status"] == "verified" for r in domain["records"])

    # Withdrawing SPF takes the domain out of verified on the next check.
    spf = next(r for r in created["records"] if (r["record"], r["type"]) == ("SPF", "TXT"))
    dns_server.withdraw(fqdn(spf["name"], name), "TXT")
    resend.Domains.verify(created["id"])
    wait_until(
        lambda: resend.Domains.get(created["id"])["status"] != "verified",
        "verification follows the DNS change",
        timeout=15,
    )

    updated = resend.Domains.update({"id": created["id"], "open_tracking": True})
    assert updated["id"] == created["id"]
    with pytest.raises(resend.exceptions.ResendError, match="Missing a field to change") as empty:
        resend.Domains.update({"id": created["id"]})
    assert empty.value.code == 422
    assert resend.Domains.get(created["id"])["open_tracking"] is True
    listed = resend.Domains.list()
    assert [d["name"] for d in listed["data"]] == [name]
    assert "records" not in listed["data"][0]
    assert resend.Domains.remove(created["id"])["deleted"] is True
    assert resend.Domains.list()["data"] == []


def test_send_get_list_batch_and_schedule(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    domain = "sending.test"
    verified_domain(dns_server, domain)
    sent = resend.Emails.send(
        {
            "from": f"Acme <hello@{domain}>",
            "to": ["ann@example.org"],
            "cc": "carl@example.org",
            "bcc": ["boss@example.org"],
            "subject": "Hello ✓",
            "html": "<p>Hi <a href='https://example.org'>there</a></p>",
            "tags": [{"name": "kind", "value": "welcome"}],
            "attachments": [{"filename": "a.txt", "content": "aGVsbG8="}],
        }
    )
    email = resend.Emails.get(sent["id"])
    assert email["from"] == f"Acme <hello@{domain}>"
    assert email["to"] == ["ann@example.org"] and email["bcc"] == ["boss@example.org"]
    # Delivery starts at once; with no mail server for example.org it is delayed.
    assert email["last_event"] in ("queued", "sent", "delivery_delayed")
    assert email["subject"] == "Hello ✓"
    assert "there" in email["text"], "text is generated from html"
    assert email["message_id"].endswith(f"@{domain}>")

    # Any address under a verified domain may send, subdomains included.
    resend.Emails.send(
        {"from": f"news@eu.{domain}", "to": "bob@example.org", "subject": "s", "text": "t"}
    )
    batch = resend.Batch.send(
        [
            {"from": f"a@{domain}", "to": f"u{i}@example.org", "subject": f"#{i}", "text": "x"}
            for i in range(3)
        ]
    )
    assert len(batch["data"]) == 3
    listed = resend.Emails.list({"limit": 4})
    assert [e["subject"] for e in listed["data"]] == ["#2", "#1", "#0", "s"]
    assert listed["has_more"] is True

    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    scheduled = resend.Emails.send(
        {"from": f"a@{domain}", "to": "c@example.org", "subject": "later", "text": "x",
         "scheduled_at": later}
    )  # fmt: skip
    assert resend.Emails.get(scheduled["id"])["last_event"] == "scheduled"
    resend.Emails.update({"id": scheduled["id"], "scheduled_at": "in 3 hours"})
    resend.Emails.cancel(scheduled["id"])
    assert resend.Emails.get(scheduled["id"])["last_event"] == "canceled"
    with pytest.raises(resend.exceptions.ValidationError):
        resend.Emails.cancel(scheduled["id"])


def test_unverified_domain_and_restricted_keys(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    name, base_url = "restricted.test", team_server.base_url
    # A 403 validation_error: the SDK knows no class for that pair and raises its base class.
    with pytest.raises(resend.exceptions.ResendError, match="not verified") as unverified:
        resend.Emails.send({"from": "a@nowhere.test", "to": "b@example.org", "subject": "s",
                            "text": "t"})  # fmt: skip
    assert unverified.value.code == 403 and unverified.value.error_type == "validation_error"
    domain = verified_domain(dns_server, name)
    other = verified_domain(dns_server, "restricted-other.test")
    locked = resend.ApiKeys.create(
        {"name": "locked", "permission": "sending_access", "domain_id": domain["id"]}
    )
    headers = {"Authorization": f"Bearer {locked['token']}"}
    ok = httpx.post(
        f"{base_url}/emails",
        headers=headers,
        json={"from": f"a@{name}", "to": "b@example.org", "subject": "s", "text": "t"},
    )
    assert ok.status_code == 200, ok.text
    refused = httpx.post(
        f"{base_url}/emails",
        headers=headers,
        json={"from": f"a@{other['name']}", "to": "b@example.org", "subject": "s", "text": "t"},
    )
    assert refused.status_code == 403 and refused.json()["name"] == "validation_error"
    listing = httpx.get(f"{base_url}/emails", headers=headers)
    assert listing.status_code == 401 and listing.json()["name"] == "restricted_api_key"

    # Another team sees none of this team's emails or domains.
    stranger_key = team_server.create_key("s", new_team="restricted keys: strangers")
    stranger = {"Authorization": f"Bearer {stranger_key}"}
    email_id = ok.json()["id"]
    assert httpx.get(f"{base_url}/emails/{email_id}", headers=stranger).status_code == 404
    assert httpx.get(f"{base_url}/domains/{domain['id']}", headers=stranger).status_code == 404
    assert httpx.get(f"{base_url}/emails", headers=stranger).json()["data"] == []
    assert httpx.get(f"{base_url}/domains", headers=stranger).json()["data"] == []

    # Nor can it add one of them (their DKIM keys would share a selector) until it is deleted.
    admin_key, resend.api_key = resend.api_key, stranger_key
    with pytest.raises(resend.exceptions.ResendError, match="registered already") as taken:
        resend.Domains.create({"name": name})
    assert taken.value.code == 403 and taken.value.error_type == "validation_error"
    resend.api_key = admin_key
    resend.Domains.remove(domain["id"])
    resend.api_key = stranger_key
    assert resend.Domains.create({"name": name})["name"] == name


def test_idempotent_resend(server: LiveServer, dns_server: AuthoritativeDnsServer) -> None:
    verified_domain(dns_server)
    params: Any = {"from": f"a@{DOMAIN}", "to": "b@example.org", "subject": "s", "text": "t"}
    first = resend.Emails.send(params, {"idempotency_key": "order-42"})
    again = resend.Emails.send(params, {"idempotency_key": "order-42"})
    assert again["id"] == first["id"]
    assert len(resend.Emails.list()["data"]) == 1
    changed = httpx.post(
        f"{server.base_url}/emails",
        headers={"Authorization": f"Bearer {resend.api_key}", "Idempotency-Key": "order-42"},
        json={**params, "subject": "other"},
    )
    assert changed.status_code == 409
    assert changed.json()["name"] == "invalid_idempotent_request"
    too_long = httpx.post(
        f"{server.base_url}/emails",
        headers={"Authorization": f"Bearer {resend.api_key}", "Idempotency-Key": "k" * 257},
        json=params,
    )
    assert too_long.status_code == 400 and too_long.json()["name"] == "invalid_idempotency_key"

    # Across a kill -9: the key still answers with the original email.
    server.stop(signal.SIGKILL)
    server.start()
    resend.api_url = server.base_url
    assert resend.Emails.send(params, {"idempotency_key": "order-42"})["id"] == first["id"]


def stored_bodies(data_dir: Path) -> dict[str, bytes]:
    """The spooled messages, read with the independent `lmdb` package (server stopped)."""
    env = lmdb.open(str(data_dir / "spool"), readonly=True, lock=False, max_dbs=32)
    bodies = env.open_db(b"_bodies", create=False)
    out = {}
    with env.begin() as txn:
        for key, stored in txn.cursor(db=bodies):
            raw = bytes(stored)
            out[bytes(key).decode()] = raw[1:] if raw[0] == 0 else lz4.block.decompress(raw[1:])
    env.close()
    return out


def test_accepted_mail_survives_kill_9_and_verifies_with_dkimpy(
    server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    domain = verified_domain(dns_server)
    ids = [
        resend.Emails.send(
            {"from": f"a@{DOMAIN}", "to": "b@example.org", "subject": f"n{i}", "text": "hi"}
        )["id"]
        for i in range(5)
    ]
    server.stop(signal.SIGKILL)
    bodies = stored_bodies(server.data_dir)
    assert set(ids) <= set(bodies)
    dkim_record = next(r for r in domain["records"] if r["record"] == "DKIM")
    txt = dkim_record["value"].encode()
    for email_id in ids:
        assert dkim.verify(bodies[email_id], dnsfunc=lambda name, timeout=5: txt)
    server.start()
    resend.api_url = server.base_url
    assert {e["id"] for e in resend.Emails.list()["data"]} == set(ids)
