"""`/webhooks` against a live `postwire serve`: the official SDK's calls, and raw HTTP for the
refusals (bad URLs, unknown kinds, inward targets, other teams, sending keys)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import resend
import resend.exceptions

from tests.e2e.conftest import LiveServer, write_config

ENDPOINT = "https://hooks.example.com/postwire"


def wire(response: Mapping[str, Any]) -> dict[str, Any]:
    """An SDK response as it came over the wire (the SDK adds `http_headers`)."""
    return {key: value for key, value in response.items() if key != "http_headers"}


def api(server: LiveServer, token: str | None = None) -> httpx.Client:
    # One request per connection, as the SDK makes them: Hypercorn stalls a kept-alive
    # connection when its response left before the request's body arrived (a refusal made
    # from the headers alone), and these requests carry bodies the server never reads.
    headers = {"Authorization": f"Bearer {token or resend.api_key}", "Connection": "close"}
    return httpx.Client(base_url=server.base_url, headers=headers)


def test_sdk_creates_gets_lists_updates_and_removes_a_webhook(team_server: LiveServer) -> None:
    created = resend.Webhooks.create(
        {"endpoint": ENDPOINT, "events": ["email.sent", "email.bounced", "email.sent"]}
    )
    assert created["object"] == "webhook"
    assert created["signing_secret"].startswith("whsec_")

    webhook = resend.Webhooks.get(created["id"])
    assert wire(webhook) == {
        "object": "webhook",
        "id": created["id"],
        "endpoint": ENDPOINT,
        "events": ["email.sent", "email.bounced"],  # the duplicate collapsed
        "status": "enabled",
        "created_at": webhook["created_at"],
        "signing_secret": created["signing_secret"],
    }
    assert webhook["created_at"].endswith("+00")

    second = resend.Webhooks.create({"endpoint": ENDPOINT + "/2", "events": ["email.opened"]})
    listed = resend.Webhooks.list()
    assert listed["object"] == "list" and listed["has_more"] is False
    assert [w["id"] for w in listed["data"]] == [second["id"], created["id"]]
    page = resend.Webhooks.list({"limit": 1})
    assert [w["id"] for w in page["data"]] == [second["id"]] and page["has_more"] is True
    rest = resend.Webhooks.list({"limit": 1, "after": second["id"]})
    assert [w["id"] for w in rest["data"]] == [created["id"]] and rest["has_more"] is False

    updated = resend.Webhooks.update(
        {
            "webhook_id": created["id"],
            "endpoint": "http://hooks.example.com/other",
            "events": ["email.delivered"],
            "status": "disabled",
        }
    )
    assert wire(updated) == {"object": "webhook", "id": created["id"]}
    webhook = resend.Webhooks.get(created["id"])
    assert webhook["endpoint"] == "http://hooks.example.com/other"
    assert (webhook["events"], webhook["status"]) == (["email.delivered"], "disabled")
    resend.Webhooks.update({"webhook_id": created["id"], "status": "enabled"})
    assert resend.Webhooks.get(created["id"])["status"] == "enabled"

    rotated = resend.Webhooks.rotate_signing_secret(created["id"])
    assert rotated["signing_secret"].startswith("whsec_")
    assert rotated["signing_secret"] != created["signing_secret"]
    assert resend.Webhooks.get(created["id"])["signing_secret"] == rotated["signing_secret"]

    assert resend.Webhooks.list_events(created["id"])["data"] == []

    removed = resend.Webhooks.remove(created["id"])
    assert wire(removed) == {"object": "webhook", "id": created["id"], "deleted": True}
    with pytest.raises(resend.exceptions.ResendError, match="Webhook not found"):
        resend.Webhooks.get(created["id"])
    assert [w["id"] for w in resend.Webhooks.list()["data"]] == [second["id"]]


REFUSED_ENDPOINTS: list[object] = [
    "hooks.example.com/in",  # no scheme
    "/in",
    "ftp://hooks.example.com/in",
    "javascript:alert(1)",
    "https://",
    "https://user:secret@hooks.example.com/in",
    "https://hooks.example.com/in put",
    "https://hooks.example.com:99999/in",
    "https://hooks.example.com:0/in",
    42,
    # Inward hosts, as written.
    "http://127.0.0.1:8080/in",
    "http://localhost/in",
    "http://LOCALHOST./in",
    "http://api.localhost/in",
    "http://[::1]/in",
    "http://[::ffff:127.0.0.1]/in",
    "http://10.1.2.3/in",
    "http://192.168.0.10/in",
    "http://169.254.169.254/latest/meta-data",
    "http://0.0.0.0/in",
    "http://2130706433/in",  # 127.0.0.1 to getaddrinfo
    "http://0x7f.1/in",
]


def test_endpoint_must_be_a_public_http_url(team_server: LiveServer) -> None:
    with api(team_server) as client:
        for endpoint in REFUSED_ENDPOINTS:
            response = client.post(
                "/webhooks", json={"endpoint": endpoint, "events": ["email.sent"]}
            )
            assert response.status_code == 422, (endpoint, response.text)
            assert response.json()["statusCode"] == 422
            assert response.json()["name"] == "validation_error"
        assert client.get("/webhooks").json()["data"] == []


@pytest.mark.parametrize(
    ("body", "name", "needle"),
    [
        ({"events": ["email.sent"]}, "missing_required_field", "`endpoint`"),
        ({"endpoint": ENDPOINT}, "missing_required_field", "`events`"),
        ({"endpoint": ENDPOINT, "events": []}, "validation_error", "non-empty"),
        ({"endpoint": ENDPOINT, "events": "email.sent"}, "validation_error", "non-empty"),
        ({"endpoint": ENDPOINT, "events": [1]}, "validation_error", "strings"),
        (
            {"endpoint": ENDPOINT, "events": ["email.sent", "email.received", "nope"]},
            "validation_error",
            "`email.received`, `nope`",
        ),
    ],
)
def test_events_are_checked(
    team_server: LiveServer, body: dict[str, object], name: str, needle: str
) -> None:
    with api(team_server) as client:
        response = client.post("/webhooks", json=body)
    assert response.status_code == 422
    payload = response.json()
    assert set(payload) == {"statusCode", "name", "message"}
    assert payload["name"] == name and needle in payload["message"]


def test_update_is_checked_like_create(team_server: LiveServer) -> None:
    created = resend.Webhooks.create({"endpoint": ENDPOINT, "events": ["email.sent"]})
    with api(team_server) as client:
        for body in (
            {"status": "paused"},
            {"events": []},
            {"events": ["email.failed"]},
            {"endpoint": "http://127.0.0.1/in"},
            {"endpoint": "mailto:ops@example.com"},
        ):
            response = client.patch(f"/webhooks/{created['id']}", json=body)
            assert (response.status_code, response.json()["name"]) == (422, "validation_error")
        # Nothing to change is a mistake, not a no-op (the id the SDK repeats does not count).
        for body in ({}, {"webhook_id": created["id"]}, {"status": None}):
            response = client.patch(f"/webhooks/{created['id']}", json=body)
            assert (response.status_code, response.json()["name"]) == (
                422,
                "missing_required_field",
            )
    assert resend.Webhooks.get(created["id"])["events"] == ["email.sent"]


def test_private_targets_need_the_operators_consent(tmp_path: Path) -> None:
    server = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
    write_config(server.config_path, server.data_dir, allow_private_webhooks=True)
    server.start()
    try:
        with api(server, server.create_key("admin")) as client:
            for endpoint in ("http://127.0.0.1:9/in", "http://localhost:9/in", "http://10.0.0.7/"):
                response = client.post(
                    "/webhooks", json={"endpoint": endpoint, "events": ["email.sent"]}
                )
                assert response.status_code == 201, response.text
            # Credentials in the URL stay refused: they would end up in logs and listings.
            response = client.post(
                "/webhooks",
                json={"endpoint": "http://u:p@127.0.0.1:9/in", "events": ["email.sent"]},
            )
            assert response.status_code == 422
    finally:
        server.stop()


def test_other_teams_and_sending_keys_get_nothing(team_server: LiveServer) -> None:
    created = resend.Webhooks.create({"endpoint": ENDPOINT, "events": ["email.sent"]})
    hook = f"/webhooks/{created['id']}"
    with api(team_server, team_server.create_key("other", new_team="other team")) as stranger:
        assert stranger.get("/webhooks").json()["data"] == []
        for method, path in (
            ("GET", hook),
            ("PATCH", hook),
            ("DELETE", hook),
            ("POST", f"{hook}/signing-secret/rotate"),
            ("GET", f"{hook}/events"),
        ):
            response = stranger.request(method, path, json={"status": "disabled"})
            assert response.status_code == 404, (method, path)
            assert response.json() == {
                "statusCode": 404,
                "name": "not_found",
                "message": "Webhook not found",
            }
    assert resend.Webhooks.get(created["id"])["status"] == "enabled"

    sending = resend.ApiKeys.create({"name": "sender", "permission": "sending_access"})
    with api(team_server, sending["token"]) as sender:
        for method, path in (("GET", "/webhooks"), ("POST", "/webhooks"), ("GET", hook)):
            response = sender.request(
                method, path, json={"endpoint": ENDPOINT, "events": ["email.sent"]}
            )
            assert response.status_code == 401
            assert response.json()["name"] == "restricted_api_key"
