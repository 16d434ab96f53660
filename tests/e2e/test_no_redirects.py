"""No route of the REST API redirects, and no absolute URL is built from request headers.

Every route (those `GET /openapi.json` documents, which are all the API serves but the few for
recipients' mail clients, listed in `tests/unit/test_openapi.py`) is asked with and without a
trailing slash, each request claiming another host and `https` through `X-Forwarded-*`: both
spellings get the same answer, none a 3xx, none a `Location`. The dashboard's router redirects
no path either (its own redirects name paths, never a host)."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from tests.e2e.conftest import DASHBOARD_READY, LiveServer
from tests.unit.test_openapi import UNDOCUMENTED

# What a client, or a proxy it passes through, may claim.
CLAIMED = {
    "Host": "evil.example",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "evil.example",
    "X-Forwarded-For": "203.0.113.9",
}


def _filled(path: str, contact_id: str) -> str:
    """`path` (OpenAPI `{name}` or Werkzeug `<conv:name>` parameters) with a value for each."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("contact_id"):
            return contact_id
        if name in ("id_or_email", "token", "name", "image_id"):
            return "x"
        if name == "ext":
            return "png"
        return str(uuid.uuid4())

    return re.sub(r"[{<](?:\w+:)?(\w+)[}>]", value, path)


def _ask(client: httpx.Client, method: str, path: str) -> httpx.Response:
    body: dict[str, object] | None = {} if method in ("post", "patch", "put") else None
    return client.request(method.upper(), path, json=body, headers=CLAIMED)


@pytest.fixture
def api(live_server: LiveServer) -> httpx.Client:
    key = live_server.create_key("admin")
    return httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def test_every_route_answers_with_and_without_a_trailing_slash_and_none_redirects(
    api: httpx.Client,
) -> None:
    contact = api.post("/contacts", json={"email": "ann@example.org"}).json()
    # The report's case: the Rust SDK's `/segments/` and every other SDK's `/segments`.
    for path in (f"/contacts/{contact['id']}/segments", f"/contacts/{contact['id']}/segments/"):
        answer = api.get(path, headers=CLAIMED)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        assert answer.json() == {"object": "list", "has_more": False, "data": []}

    document = api.get("/openapi.json").json()
    operations = [(method, path) for path, item in document["paths"].items() for method in item]
    operations += [("get", rule) for rule in UNDOCUMENTED]
    assert len(operations) > 80
    asked = 0
    for method, path in operations:
        # Real ids are read, never changed: both spellings must find the same thing.
        bare = _filled(path, contact["id"] if method == "get" else str(uuid.uuid4()))
        answers = {spelling: _ask(api, method, spelling) for spelling in (bare, bare + "/")}
        for spelling, answer in answers.items():
            assert not 300 <= answer.status_code < 400, (method, spelling, answer.headers)
            assert "location" not in answer.headers, (method, spelling, answer.headers)
            assert "evil.example" not in answer.text, (method, spelling, answer.text)
        statuses = {spelling: answer.status_code for spelling, answer in answers.items()}
        assert len(set(statuses.values())) == 1, (method, statuses)
        asked += 2
    # Doubled slashes are not a path of ours: a 404, not a redirect to the merged path.
    doubled = api.get("//emails", headers=CLAIMED)
    assert doubled.status_code == 404 and "location" not in doubled.headers
    assert doubled.json()["name"] == "not_found"
    assert asked == 2 * len(operations)


def test_the_dashboard_builds_no_url_from_the_host_header(live_server: LiveServer) -> None:
    dashboard = live_server.wait_for_log(DASHBOARD_READY, 0).group(1).rstrip("/")
    with httpx.Client(base_url=dashboard, timeout=30) as client:
        for path in ("/login/", "//login", "/emails/", "//emails", "/team/", "/static//x"):
            answer = client.get(path, headers=CLAIMED)
            location = answer.headers.get("location", "")
            assert answer.status_code not in (301, 302, 307, 308), (path, answer.headers)
            assert "evil.example" not in location and "://" not in location, (path, location)
        login = client.get("/login/", headers=CLAIMED)
        assert login.status_code == 200 and 'name="password"' in login.text
