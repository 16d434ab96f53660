"""API keys and the API's cross-cutting rules, driven by the official `resend` SDK and raw HTTP."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
import resend
import resend.exceptions

from tests.e2e.conftest import LiveServer, write_config


def test_sdk_creates_lists_renames_and_deletes_keys(team_server: LiveServer) -> None:
    created = resend.ApiKeys.create({"name": "ci"})
    assert created["token"].startswith("re_")
    listed = resend.ApiKeys.list()
    assert listed["object"] == "list"
    names = {item["name"]: item for item in listed["data"]}
    assert set(names) == {"admin", "ci"}
    assert all("token" not in item for item in listed["data"]), "tokens are shown only once"
    assert names["ci"]["created_at"].endswith("+00")

    renamed = httpx.patch(
        f"{team_server.base_url}/api-keys/{created['id']}",
        json={"name": "ci-renamed"},
        headers={"Authorization": f"Bearer {resend.api_key}"},
    )
    assert renamed.json() == {"object": "api_key", "id": created["id"]}
    removed = resend.ApiKeys.remove(created["id"])
    assert removed["deleted"] is True
    assert {item["name"] for item in resend.ApiKeys.list()["data"]} == {"admin"}

    # The deleted key no longer authenticates.
    resend.api_key = created["token"]
    with pytest.raises(resend.exceptions.ValidationError, match="API key is invalid"):
        resend.ApiKeys.list()


def test_new_key_works_and_sending_access_is_restricted(team_server: LiveServer) -> None:
    sending = resend.ApiKeys.create({"name": "sender", "permission": "sending_access"})
    response = httpx.get(
        f"{team_server.base_url}/api-keys", headers={"Authorization": f"Bearer {sending['token']}"}
    )
    assert response.status_code == 401
    assert response.json() == {
        "statusCode": 401,
        "name": "restricted_api_key",
        "message": "This API key is restricted to only send emails.",
    }


def test_pagination_of_keys(team_server: LiveServer) -> None:
    for i in range(4):
        resend.ApiKeys.create({"name": f"k{i}"})
    headers = {"Authorization": f"Bearer {resend.api_key}"}
    first = httpx.get(f"{team_server.base_url}/api-keys?limit=2", headers=headers).json()
    assert [k["name"] for k in first["data"]] == ["k3", "k2"] and first["has_more"] is True
    cursor = first["data"][-1]["id"]
    rest = httpx.get(
        f"{team_server.base_url}/api-keys?limit=10&after={cursor}", headers=headers
    ).json()
    assert [k["name"] for k in rest["data"]] == ["k1", "k0", "admin"]
    assert rest["has_more"] is False
    for bad in ("limit=0", "limit=101", "limit=x", f"after={cursor}&before={cursor}"):
        response = httpx.get(f"{team_server.base_url}/api-keys?{bad}", headers=headers)
        assert response.status_code == 422, bad
        assert response.json()["name"] == "validation_error"


def test_teams_are_isolated(team_server: LiveServer) -> None:
    mine = resend.ApiKeys.create({"name": "mine"})
    other_token = team_server.create_key("other", new_team="other team")
    headers = {"Authorization": f"Bearer {other_token}"}
    listed = httpx.get(f"{team_server.base_url}/api-keys", headers=headers).json()
    assert [k["name"] for k in listed["data"]] == ["other"]
    for method in ("DELETE", "PATCH"):
        response = httpx.request(
            method,
            f"{team_server.base_url}/api-keys/{mine['id']}",
            headers=headers,
            json={"name": "x"},
        )
        assert response.status_code == 404
        assert response.json()["name"] == "not_found"
    assert "mine" in {k["name"] for k in resend.ApiKeys.list()["data"]}


BOGUS_KEY = {"Authorization": "Bearer re_nope_nope"}
BAD_PERMISSION = b'{"name": "a", "permission": "root"}'


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "name"),
    [
        ("GET", "/api-keys", None, {}, 401, "missing_api_key"),
        (
            "GET",
            "/api-keys",
            None,
            {"Authorization": "Bearer re_nope_nope"},
            400,
            "validation_error",
        ),
        ("GET", "/api-keys", None, {"Authorization": "Basic abc"}, 401, "missing_api_key"),
        ("GET", "/no-such-endpoint", None, None, 404, "not_found"),
        ("PUT", "/api-keys", None, None, 405, "method_not_allowed"),
        ("POST", "/api-keys", b"{not json", None, 400, "validation_error"),
        ("POST", "/api-keys", b"[1, 2]", None, 422, "validation_error"),
        ("POST", "/api-keys", b"{}", None, 422, "missing_required_field"),
        ("POST", "/api-keys", b'{"name": 5}', None, 422, "validation_error"),
        ("POST", "/api-keys", b'{"name": "' + b"x" * 51 + b'"}', None, 422, "validation_error"),
        (
            "POST",
            "/api-keys",
            b'{"name": "a", "permission": "root"}',
            None,
            422,
            "validation_error",
        ),
        ("POST", "/api-keys", b'{"name": "a\\r\\nX-Evil: 1"}', None, 422, "validation_error"),
    ],
)
def test_error_paths_answer_in_the_contract_shape(
    team_server: LiveServer,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str] | None,
    status: int,
    name: str,
) -> None:
    if headers is None:
        headers = {"Authorization": f"Bearer {resend.api_key}"}
    response = httpx.request(
        method,
        team_server.base_url + path,
        content=body,
        headers={**headers, "Content-Type": "application/json"},
    )
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    assert set(payload) == {"statusCode", "name", "message"}
    assert (payload["statusCode"], payload["name"]) == (status, name)


def test_sdk_errors_are_the_right_classes(team_server: LiveServer) -> None:
    resend.api_key = "re_wrong_key"
    with pytest.raises(resend.exceptions.ValidationError):
        resend.ApiKeys.list()


def test_rate_limit_headers_and_429(tmp_path: Path) -> None:
    server = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
    write_config(server.config_path, server.data_dir, rate_limit=3)
    server.start()
    try:
        token = server.create_key("limited")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers) as client:
            # Eight quick requests span at most two one-second windows of three each.
            responses = [client.get("/api-keys") for _ in range(8)]
        statuses = [r.status_code for r in responses]
        assert statuses.count(200) <= 6 and 429 in statuses
        ok = responses[0]
        assert ok.headers["ratelimit-limit"] == "3"
        assert int(ok.headers["ratelimit-remaining"]) == 2
        assert int(ok.headers["ratelimit-reset"]) >= 1
        limited = next(r for r in responses if r.status_code == 429)
        assert limited.json()["name"] == "rate_limit_exceeded"
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.headers["ratelimit-remaining"] == "0"
    finally:
        server.stop()


def test_keys_survive_kill_9(live_server: LiveServer) -> None:
    token = live_server.create_key("durable")
    resend.api_url = live_server.base_url
    resend.api_key = token
    created = resend.ApiKeys.create({"name": "made over the API"})
    live_server.stop(signal.SIGKILL)
    live_server.start()
    resend.api_url = live_server.base_url
    names = {k["name"] for k in resend.ApiKeys.list()["data"]}
    assert names == {"durable", "made over the API"}
    resend.api_key = created["token"]
    assert resend.ApiKeys.list()["object"] == "list"
