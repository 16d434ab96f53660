"""The official Rust SDK, the `resend-rs` crate, against a live `postwire serve`: the program in
tests/sdk_rust makes every call the crate offers for contacts, contact properties, segments,
topics, contact imports, templates and broadcasts, plus emails sent with a template (alone and
in a batch) and a plain one. The crate is the strictest reader of answers (a missing required
key or a wrong type is an error), so a call it parses is a call every SDK can use. A few
results are then read again over raw HTTP."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
import resend

from tests import rust_sdk_build
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, verified_domain


@pytest.fixture(scope="session")
def rust_sdk_program() -> Path:
    """The program, built once per session (debug profile; over a minute on two cores cold, a
    second when nothing changed), its build started as the session collected this test.
    Postwire's own build needs cargo, so a missing one fails."""
    return rust_sdk_build.wait()


def run_program(program: Path, base_url: str, api_key: str, domain: str) -> dict[str, str]:
    """Runs the program; answers the ids it printed (`id <name> <id>` lines) once every call
    printed `ok`."""
    # The crate also throttles itself to 9 calls per 1.1 s unless told otherwise; the server
    # in these tests has no rate limit.
    env = {**os.environ, "RESEND_RATE_LIMIT": "1000"}
    result = subprocess.run(
        [str(program), base_url, api_key, domain],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    print(result.stdout)  # every call's line, shown when the test fails
    lines = result.stdout.splitlines()
    failed = [line for line in lines if not line.startswith(("ok ", "id "))]
    assert result.returncode == 0 and not failed, "\n".join([*failed, result.stderr])
    assert sum(line.startswith("ok ") for line in lines) >= 60, result.stdout
    printed_ids = (line.split() for line in lines if line.startswith("id "))
    return {name: value for _, name, value in printed_ids}


def test_the_rust_sdk_makes_every_audience_template_and_broadcast_call(
    server: LiveServer, dns_server: AuthoritativeDnsServer, rust_sdk_program: Path
) -> None:
    domain = verified_domain(dns_server)
    api_key = resend.api_key
    assert api_key is not None
    ids = run_program(rust_sdk_program, server.base_url, api_key, domain["name"])

    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=server.base_url, headers=headers) as api:
        broadcast = api.get(f"/broadcasts/{ids['broadcast']}").json()
        assert broadcast["status"] in ("queued", "sending", "sent"), broadcast
        assert broadcast["subject"] == "Rust SDK news for {{{FIRST_NAME|you}}}"
        assert broadcast["segment_id"] == broadcast["audience_id"] == ids["segment"]
        # Canceling a broadcast before it is due makes it a draft again, as Resend does.
        canceled = api.get(f"/broadcasts/{ids['canceled_broadcast']}").json()
        assert canceled["status"] == "draft", canceled

        imported = api.get("/contacts/imported.reader%40example.org").json()
        assert imported["first_name"] == "Imogen", imported
        members = api.get(f"/segments/{ids['segment']}/contacts").json()["data"]
        assert "imported.reader@example.org" in {member["email"] for member in members}
        job = api.get(f"/contacts/imports/{ids['import']}").json()
        assert job["status"] == "completed", job
        assert (job["counts"]["created"], job["counts"]["failed"]) == (1, 1), job

        email = api.get(f"/emails/{ids['template_email']}").json()
        assert email["subject"] == "Welcome aboard", email
        assert "Hello Ada, you have 1 seats" in email["html"], email
        assert api.get(f"/emails/{ids['email']}").json()["to"] == ["ada.lovelace@example.org"]

        for gone in (
            f"/contacts/{ids['contact']}",
            f"/topics/{ids['topic']}",
            f"/templates/{ids['template']}",
        ):
            answer = api.get(gone)
            assert answer.status_code == 404 and answer.json()["name"] == "not_found", gone
