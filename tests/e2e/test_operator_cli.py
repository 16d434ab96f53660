"""The operator's commands (`postwire status`, `queue`, `keys`, `users`, `domains`, `config
check`) run as separate processes against one live `postwire serve` shared by the module, with
mail queued for a destination whose server refuses connections (so it waits to retry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, verified_domain, wait_until, write_config
from tests.ports import free_address

DOMAIN = "operator-cli.test"
DEFERRED = "deferred.test"  # routed to a port where nothing listens: every attempt is deferred


@pytest.fixture(scope="module")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("operator-cli")
    live = LiveServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
    write_config(
        live.config_path,
        live.data_dir,
        nameservers=(knot.nameserver,),
        routes={DEFERRED: free_address()},
    )
    live.start()
    resend.api_url = live.base_url
    resend.api_key = live.create_key("admin", new_team="operators")
    verified_domain(knot, DOMAIN)
    yield live
    resend.api_key = None
    if live.process is not None:
        live.stop()


def postwire(
    server: LiveServer, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}
    return subprocess.run(
        [sys.executable, "-m", "postwire", *args, "--config", str(server.config_path)],
        capture_output=True,
        text=True,
        check=False,
        env=environ | (env or {}),
    )


def as_json(server: LiveServer, *args: str, **kwargs: Any) -> Any:
    result = postwire(server, *args, "--json", **kwargs)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def api(server: LiveServer, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token or resend.api_key}"}
    return httpx.Client(base_url=server.base_url, headers=headers)


def test_status_names_the_processes_listeners_queue_and_spool(shared_server: LiveServer) -> None:
    status = as_json(shared_server, "status")
    assert status["running"] is True
    assert shared_server.process is not None
    (main,) = status["processes"]
    assert main["pid"] == shared_server.process.pid and main["alive"] is True
    assert main["listeners"]["REST API"] == [shared_server.base_url]
    assert set(main["listeners"]) >= {"REST API", "dashboard", "metrics"}
    assert status["queue"]["messages"] >= 0
    assert 0 < status["spool"]["used_bytes"] <= status["spool"]["map_size_bytes"]
    human = postwire(shared_server, "status")
    assert human.returncode == 0, human.stderr
    assert "service: running" in human.stdout and shared_server.base_url in human.stdout


def send(to: str, subject: str) -> str:
    sent = resend.Emails.send({"from": f"ops@{DOMAIN}", "to": [to], "subject": subject,
                               "text": "queued"})  # fmt: skip
    return str(sent["id"])


def queued(server: LiveServer, *args: str) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in as_json(server, "queue", "list", *args)}


def test_queue_list_show_retry_and_delete(shared_server: LiveServer) -> None:
    first = send(f"a@{DEFERRED}", "first")
    second = send(f"b@{DEFERRED}", "second")
    wait_until(
        lambda: {first, second} <= set(queued(shared_server, "--domain", DEFERRED)),
        "both wait to retry for the refusing destination",
    )
    waiting = queued(shared_server, "--domain", DEFERRED)
    assert waiting[first]["status"] == "deferred" and waiting[first]["attempts"] == 1
    assert waiting[first]["pending"] == [f"a@{DEFERRED}"] and waiting[first]["subject"] == "first"
    assert first not in queued(shared_server, "--older-than", "1h")  # a second old, not an hour
    page = as_json(shared_server, "queue", "list", "--limit", "1")
    assert len(page) == 1
    after = queued(shared_server, "--after", page[0]["id"])
    assert page[0]["id"] not in after

    shown = as_json(shared_server, "queue", "show", first)
    (attempt,) = shown["attempt_history"]
    assert attempt["recipients"][0]["status"] == "delivery_delayed"
    human = postwire(shared_server, "queue", "show", first)
    assert "deferred" in human.stdout and f"a@{DEFERRED}" in human.stdout

    # Retry: due now, so the running delivery worker tries it again without waiting its back-off.
    retried = as_json(shared_server, "queue", "retry", first)
    assert retried == {"retry": [first], "refused": []}
    wait_until(
        lambda: queued(shared_server, "--domain", DEFERRED)[first]["attempts"] == 2,
        "the delivery worker tried the message again",
    )

    deleted = as_json(shared_server, "queue", "delete", second)
    assert deleted == {"delete": [second], "refused": []}
    assert second not in queued(shared_server)
    gone = postwire(shared_server, "queue", "show", second)
    assert gone.returncode == 1 and "no message" in gone.stderr
    with api(shared_server) as client:
        assert client.get(f"/emails/{second}").json()["last_event"] == "canceled"
    again = postwire(shared_server, "queue", "retry", second)
    assert again.returncode == 1 and "no message" in again.stdout
    status = as_json(shared_server, "status")
    assert status["queue"]["retry_destinations"].get(DEFERRED) == 1  # the first alone now


def test_keys_list_and_revoke(shared_server: LiveServer) -> None:
    token = shared_server.create_key("to-revoke", new_team="key-team")
    with api(shared_server, token) as client:
        assert client.get("/domains").status_code == 200
    keys = {key["name"]: key for key in as_json(shared_server, "keys", "list")}
    assert keys["to-revoke"]["team"] == "key-team"
    revoked = as_json(shared_server, "keys", "revoke", keys["to-revoke"]["id"])
    assert revoked == {"object": "api_key", "id": keys["to-revoke"]["id"], "deleted": True}
    with api(shared_server, token) as client:
        refused = client.get("/domains")
    assert (refused.status_code, refused.json()["message"]) == (400, "API key is invalid")
    unknown = postwire(shared_server, "keys", "revoke", "no-such-key")
    assert unknown.returncode == 1 and "no API key" in unknown.stderr


def test_users_list_and_reset_mfa(shared_server: LiveServer) -> None:
    created = subprocess.run(
        [sys.executable, "-m", "postwire", "users", "create", "--email", "ann@example.org",
         "--team", "operators", "--password-stdin", "--config", str(shared_server.config_path)],
        input="a long enough password\n", capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    users = {user["email"]: user for user in as_json(shared_server, "users", "list")}
    assert users["ann@example.org"]["mfa"] is False
    assert users["ann@example.org"]["teams"] == ["operators (owner)"]
    reset = as_json(shared_server, "users", "reset-mfa", "ann@example.org")
    assert reset == {"email": "ann@example.org", "factors_removed": 0, "sessions_ended": 0}
    unknown = postwire(shared_server, "users", "reset-mfa", "nobody@example.org")
    assert unknown.returncode == 1 and "no dashboard user" in unknown.stderr


def test_domains_list_and_delete(shared_server: LiveServer) -> None:
    added = resend.Domains.create({"name": "short-lived.test"})
    domains = {domain["name"]: domain for domain in as_json(shared_server, "domains", "list")}
    assert domains[DOMAIN]["status"] == "verified"
    assert domains["short-lived.test"]["id"] == added["id"]
    deleted = as_json(shared_server, "domains", "delete", "short-lived.test")
    assert deleted == {"object": "domain", "id": added["id"], "deleted": True}
    with api(shared_server) as client:
        assert client.get(f"/domains/{added['id']}").status_code == 404


def test_config_check_names_each_origin(shared_server: LiveServer) -> None:
    env = {"POSTWIRE_API_RATE_LIMIT": "7", "POSTWIRE_AUTH_GITHUB_CLIENT_SECRET": "s3cret"}
    rows = as_json(shared_server, "config", "check", "--sandbox", env=env)
    by_key = {row["key"]: row for row in rows}
    assert by_key["data_dir"]["origin"] == "file"
    assert by_key["data_dir"]["source"] == str(shared_server.config_path)
    assert by_key["api.rate_limit"] == {
        "key": "api.rate_limit", "value": 7, "origin": "environment",
        "source": "POSTWIRE_API_RATE_LIMIT", "env": "POSTWIRE_API_RATE_LIMIT",
    }  # fmt: skip
    assert by_key["sandbox"]["origin"] == "flag" and by_key["sandbox"]["value"] is True
    assert by_key["smtp.max_message_size"]["origin"] == "default"
    assert by_key["auth.github_client_secret"]["value"] == "(set, not shown)"
    human = postwire(shared_server, "config", "check", env=env)
    assert human.returncode == 0 and "s3cret" not in human.stdout
    assert "environment: POSTWIRE_API_RATE_LIMIT" in human.stdout
    bad = postwire(shared_server, "config", "check", env={"POSTWIRE_API_RATE_LIMIT": "many"})
    assert bad.returncode == 2 and "POSTWIRE_API_RATE_LIMIT" in bad.stderr
