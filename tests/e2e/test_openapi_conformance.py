"""`GET /openapi.json` and the live server's answers agree, as schemathesis sees them.

Schemathesis reads the document from a live `postwire serve`, generates requests for every
operation (its coverage phase: each field's edge cases, valid and invalid, and the methods a
path does not serve; then a few random ones) and checks every answer against the document:
status, content type, headers and body schema. A verified domain, an email, a webhook, a
suppression and a published template are made first, and their ids are the path parameters, so
the answers checked include the full objects, not only errors.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, verified_domain

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "unsupported_method",
    "allow_header_conformance",
)
# Random cases per operation after the coverage phase's (about a thousand in all, whatever
# this is): the run takes 15 to 20 s on 2 cores.
MAX_EXAMPLES = 5


def test_answers_match_the_openapi_document(
    server: LiveServer, dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    domain = verified_domain(dns_server)
    email = resend.Emails.send(
        {"from": f"a@{DOMAIN}", "to": "b@example.org", "subject": "s", "text": "t"}
    )
    headers = {"Authorization": f"Bearer {resend.api_key}"}
    webhook = httpx.post(
        f"{server.base_url}/webhooks",
        headers=headers,
        json={"endpoint": "https://hooks.example.org/in", "events": ["email.sent"]},
    ).json()
    suppression = httpx.post(
        f"{server.base_url}/suppressions", headers=headers, json={"email": "gone@example.org"}
    ).json()
    template = resend.Templates.create(
        {"name": "t", "alias": "t", "html": "<p>{{{A}}}</p>",
         "variables": [{"key": "A", "type": "string", "fallback_value": "a"}]}
    )  # fmt: skip
    resend.Templates.publish(template["id"])
    segment = resend.Segments.create({"name": "s"})
    topic = resend.Topics.create({"name": "t", "default_subscription": "opt_in"})
    prop = resend.ContactProperties.create({"key": "plan", "type": "string"})
    contact = resend.Contacts.create(
        {"email": "c@example.org", "properties": {"plan": "pro"}, "segments": [segment["id"]],
         "topics": [{"id": topic["id"], "subscription": "opt_out"}]}
    )  # fmt: skip
    broadcast = resend.Broadcasts.create(
        {"segment_id": segment["id"], "from": f"a@{DOMAIN}", "subject": "s", "html": "<p>x</p>"}
    )
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        "[parameters]\n"
        f'domain_id = "{domain["id"]}"\n'
        f'email_id = "{email["id"]}"\n'
        f'webhook_id = "{webhook["id"]}"\n'
        f'id_or_email = "{suppression["email"]}"\n'
        f'id_or_alias = "{template["id"]}"\n'
        f'segment_id = "{segment["id"]}"\n'
        f'audience_id = "{segment["id"]}"\n'
        f'topic_id = "{topic["id"]}"\n'
        f'property_id = "{prop["id"]}"\n'
        f'contact_id_or_email = "{contact["id"]}"\n'
        f'broadcast_id = "{broadcast["id"]}"\n'
    )
    schemathesis = Path(sys.executable).with_name("schemathesis")
    run = subprocess.run(
        [str(schemathesis), "--config-file", str(config), "--no-color", "run",
         f"{server.base_url}/openapi.json", "--url", server.base_url,
         "--header", f"Authorization: Bearer {resend.api_key}",
         "--checks", ",".join(CHECKS), "--max-examples", str(MAX_EXAMPLES), "--seed", "1",
         "--workers", "1", "--phases", "coverage,fuzzing", "--generation-database", "none",
         "--suppress-health-check", "all"],
        cwd=tmp_path,  # its reports and caches stay out of the repository
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
