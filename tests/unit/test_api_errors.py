"""Errors of the app itself: an unexpected failure is a 500 that leaks nothing; unknown paths,
wrong methods and bad cursors answer in the contract's words."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio
from quart import typing as quart_typing

from postwire import _core
from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.api.request_body import nests_deeper_than
from postwire.config import load_config
from postwire.store import accounts
from postwire.store.spool import TABLES, Spool

NOW = datetime(2027, 3, 1, 12, 0, 0, tzinfo=UTC)


async def test_unexpected_error_leaks_nothing(tmp_path: Path) -> None:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    app = create_app(ApiContext(config=config, spool=spool))

    @app.get("/boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("secret detail /etc/passwd")

    app.before_request_funcs.clear()  # no key needed for this probe
    response = await app.test_client().get("/boom")
    assert response.status_code == 500
    body = await response.get_json()
    assert body == {
        "statusCode": 500,
        "name": "application_error",
        "message": "An unexpected error occurred.",
    }
    assert b"secret" not in await response.get_data()
    spool.core.close()


@asynccontextmanager
async def api_client(
    tmp_path: Path,
) -> AsyncIterator[tuple[quart_typing.TestClientProtocol, dict[str, str]]]:
    """The app on a real spool, a test client and one full_access key's headers."""
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
        app = create_app(ApiContext(config=config, spool=spool))
        team = await accounts.create_team(spool, "team", NOW)
        _, token = await accounts.create_api_key(spool, team.id, "k", "full_access", None, NOW)
        async with app.test_app():
            yield app.test_client(), {"Authorization": f"Bearer {token}"}
        nursery.cancel_scope.cancel()
    await spool.close()


UNKNOWN_ENDPOINTS = [
    ("GET", "/emails/receiving"),  # upstream endpoints Postwire does not serve (yet)
    ("GET", "/emails/receiving/01a20f9a-67fe-77e1-8da4-6826a52d0d20"),
    ("GET", "/automations"),
    ("POST", "/domains/not-an-id/claim/verify"),
    ("GET", "/nothing/here"),
    ("GET", "/domains/not-an-id/verify"),
    ("GET", "/webhooks/01a20f9a-67fe-77e1-8da4-6826a52d0d20/events/evt_1"),
    ("GET", "/sandbox/messages/latest"),
]

WRONG_METHODS = [
    ("PUT", "/domains", "GET, HEAD, POST"),
    ("DELETE", "/emails", "GET, HEAD, POST"),
    ("POST", "/emails/01a20f9a-67fe-77e1-8da4-6826a52d0d20", "GET, HEAD, PATCH"),
    ("OPTIONS", "/api-keys", "GET, HEAD, POST"),
    ("GET", "/suppressions/batch@example.org/x", None),  # an address may hold a `/`
]


async def test_unknown_endpoints_and_wrong_methods(tmp_path: Path) -> None:
    async with api_client(tmp_path) as (client, headers):
        for method, path in UNKNOWN_ENDPOINTS:
            response = await client.open(path, method=method, headers=headers, json={})
            assert response.status_code == 404, (method, path)
            assert await response.get_json() == {
                "statusCode": 404,
                "name": "not_found",
                "message": "The requested endpoint does not exist.",
            }, (method, path)
        for method, path, allowed in WRONG_METHODS:
            response = await client.open(path, method=method, headers=headers, json={})
            body = await response.get_json()
            if allowed is None:  # a known path: the resource is looked for
                assert (response.status_code, body["message"]) == (404, "Suppression not found")
                continue
            assert response.status_code == 405, (method, path)
            assert body["name"] == "method_not_allowed", body
            assert method in body["message"]
            assert response.headers["Allow"] == allowed
        # An id-shaped segment is an id: the resource, not the endpoint, is missing.
        missing = await client.get(f"/emails/{_core.new_id()}", headers=headers)
        assert (await missing.get_json())["message"] == "Email not found"


async def test_cursors_must_be_ids(tmp_path: Path) -> None:
    async with api_client(tmp_path) as (client, headers):
        for path in ("/emails", "/domains", "/api-keys", "/webhooks", "/suppressions"):
            for query in ("after=zzz", "before=zzz", "after=1%20OR%201"):
                response = await client.get(f"{path}?{query}", headers=headers)
                assert response.status_code == 422, (path, query)
                assert (await response.get_json())["name"] == "validation_error"
        # An id that is no longer listed still places the page (ids sort by creation).
        response = await client.get(f"/emails?after={_core.new_id()}", headers=headers)
        assert response.status_code == 200


@pytest.mark.parametrize(
    ("body", "limit", "deeper"),
    [
        ("1", 0, False),
        ("[]", 0, True),
        ("[]", 1, False),
        ("[[]]", 1, True),
        ('{"a": [{}]}', 3, False),
        ('{"a": [{}]}', 2, True),
        ('{"a": "[[[[[[", "b": ["{{{{"]}', 2, False),  # brackets in strings are text
        ("[" * 32 + "]" * 32, 32, False),
        ("[" * 33 + "]" * 33, 32, True),
        ("[1, [2, [3]], " + "{}, " * 1000 + "4]", 3, False),
    ],
)
def test_nesting_depth(body: str, limit: int, deeper: bool) -> None:
    assert nests_deeper_than(json.loads(body), limit) is deeper
