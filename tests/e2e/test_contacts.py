"""Contacts against a live `postwire serve`: every call of the official Python SDK, raw HTTP for
the legacy audience-scoped paths and every refusal, team isolation, and the contact.* webhooks
a real receiver gets, verified with `svix`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import resend
from svix.webhooks import Webhook

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, serving, wait_until
from tests.webhook_receiver import WebhookReceiver


@pytest.fixture(scope="module")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[LiveServer]:
    """The module's server lets webhooks reach a receiver on loopback, for the contact.*
    webhooks test; no other test here makes a webhook."""
    with serving(tmp_path_factory.mktemp("contacts"), knot, allow_private_webhooks=True) as live:
        yield live


@pytest.fixture
def api(team_server: LiveServer) -> Iterator[httpx.Client]:
    """Raw HTTP with the full-access key of the test's own team, which the SDK uses too."""
    headers = {"Authorization": f"Bearer {resend.api_key}"}
    with httpx.Client(base_url=team_server.base_url, headers=headers) as client:
        yield client


def fields(answer: Any) -> dict[str, Any]:
    """An SDK answer without the `http_headers` the SDK adds."""
    return {key: value for key, value in answer.items() if key != "http_headers"}


def refusal(response: httpx.Response, status: int, name: str = "validation_error") -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["statusCode"] == status and body["name"] == name, body
    return str(body["message"])


def test_the_sdk_manages_contacts_with_typed_properties(api: httpx.Client) -> None:
    plan = resend.ContactProperties.create(
        {"key": "plan", "type": "string", "fallback_value": "free"}
    )
    resend.ContactProperties.create({"key": "age", "type": "number"})
    news = resend.Segments.create({"name": "News"})
    weekly = resend.Topics.create({"name": "Weekly", "default_subscription": "opt_out"})

    created = resend.Contacts.create(
        {
            "email": "Ada@Example.org",
            "first_name": "Ada",
            "last_name": "Lovelace",
            "properties": {"plan": "pro", "age": 36},
            "segments": [{"id": news["id"]}],
            "topics": [{"id": weekly["id"], "subscription": "opt_in"}],
        }
    )
    assert created["object"] == "contact"
    bob = resend.Contacts.create({"email": "bob@example.org"})

    by_id = fields(resend.Contacts.get(id=created["id"]))
    assert by_id == fields(resend.Contacts.get(email="ada@example.org"))
    assert by_id["object"] == "contact" and by_id["email"] == "Ada@Example.org"
    assert by_id["first_name"] == "Ada" and by_id["unsubscribed"] is False
    assert by_id["properties"] == {
        "plan": {"value": "pro", "type": "string"},
        "age": {"value": "36", "type": "number"},
    }
    unnamed = resend.Contacts.get(id=bob["id"])
    assert unnamed["first_name"] is None and unnamed["properties"] == {}

    resend.Contacts.update(
        {"id": created["id"], "first_name": "Augusta", "properties": {"age": None, "plan": "team"}}
    )
    resend.Contacts.update({"email": "ada@example.org", "unsubscribed": True})
    changed = resend.Contacts.get(id=created["id"])
    assert changed["first_name"] == "Augusta" and changed["unsubscribed"] is True
    assert changed["properties"] == {"plan": {"value": "team", "type": "string"}}

    listed = resend.Contacts.list()
    assert [c["id"] for c in listed["data"]] == [bob["id"], created["id"]]
    assert listed["has_more"] is False and set(listed["data"][0]) == {
        "id",
        "email",
        "first_name",
        "last_name",
        "created_at",
        "unsubscribed",
    }
    first = resend.Contacts.list(params={"limit": 1})
    assert [c["id"] for c in first["data"]] == [bob["id"]] and first["has_more"] is True
    rest = resend.Contacts.list(params={"limit": 1, "after": bob["id"]})
    assert [c["id"] for c in rest["data"]] == [created["id"]] and rest["has_more"] is False
    back = resend.Contacts.list(params={"before": created["id"]})
    assert [c["id"] for c in back["data"]] == [bob["id"]]
    in_news = resend.Contacts.list(segment_id=news["id"])
    assert [c["id"] for c in in_news["data"]] == [created["id"]]
    in_news_too = api.get("/contacts", params={"segment_id": news["id"]}).json()
    assert in_news_too["data"] == in_news["data"]

    # Deleting a property hides the values contacts hold under its key.
    resend.ContactProperties.remove(plan["id"])
    assert resend.Contacts.get(id=created["id"])["properties"] == {}

    removed = fields(resend.Contacts.remove(email="ada@example.org"))
    assert removed == {
        "object": "contact",
        "id": created["id"],
        "contact": created["id"],
        "deleted": True,
    }
    with pytest.raises(resend.exceptions.ResendError):
        resend.Contacts.get(id=created["id"])
    assert resend.Contacts.list(segment_id=news["id"])["data"] == []


def test_an_address_with_a_slash_is_found_percent_encoded(api: httpx.Client) -> None:
    created = resend.Contacts.create({"email": "a/b+c@example.org"})
    assert resend.Contacts.get(email="a/b+c@example.org")["id"] == created["id"]
    assert api.get("/contacts/a%2Fb%2Bc%40example.org").json()["id"] == created["id"]
    resend.Contacts.update({"email": "a/b+c@example.org", "last_name": "Slash"})
    assert resend.Contacts.remove(email="a/b+c@example.org")["deleted"] is True


def test_the_legacy_audience_paths(api: httpx.Client) -> None:
    made_raw = api.post("/audiences", json={"name": "Newsletter"})
    assert made_raw.status_code == 201
    audience = made_raw.json()
    assert audience["object"] == "audience" and audience["name"] == "Newsletter"
    aid = audience["id"]
    with pytest.deprecated_call():  # the SDK's Audiences call /segments
        assert resend.Audiences.get(aid)["name"] == "Newsletter"
    via_sdk = resend.Contacts.create({"email": "sdk@example.org", "audience_id": aid})
    made = api.post(
        f"/audiences/{aid}/contacts", json={"email": "raw@example.org", "first_name": "Raw"}
    )
    assert made.status_code == 201, made.text
    raw_id = made.json()["id"]
    outsider = resend.Contacts.create({"email": "outside@example.org"})

    listed = api.get(f"/audiences/{aid}/contacts").json()
    assert [c["id"] for c in listed["data"]] == [raw_id, via_sdk["id"]]
    assert resend.Contacts.list(audience_id=aid)["data"] == listed["data"]
    page = api.get(f"/audiences/{aid}/contacts", params={"limit": 1}).json()
    assert [c["id"] for c in page["data"]] == [raw_id] and page["has_more"] is True

    got = api.get(f"/audiences/{aid}/contacts/raw%40example.org").json()
    assert got["id"] == raw_id and got["first_name"] == "Raw"
    assert resend.Contacts.get(audience_id=aid, id=via_sdk["id"])["email"] == "sdk@example.org"
    refusal(api.get(f"/audiences/{aid}/contacts/{outsider['id']}"), 404, "not_found")

    patched = api.patch(f"/audiences/{aid}/contacts/{raw_id}", json={"last_name": "Data"})
    assert patched.json() == {"object": "contact", "id": raw_id}
    resend.Contacts.update({"audience_id": aid, "id": via_sdk["id"], "first_name": "Sdk"})
    assert resend.Contacts.get(id=via_sdk["id"])["first_name"] == "Sdk"

    # An address the team has, added to another audience: that contact joins it.
    other = api.post("/audiences", json={"name": "Other"}).json()
    joined = api.post(f"/audiences/{other['id']}/contacts", json={"email": "RAW@example.org"})
    assert joined.status_code == 201 and joined.json()["id"] == raw_id
    message = refusal(
        api.post(f"/audiences/{aid}/contacts", json={"email": "raw@example.org"}), 422
    )
    assert "already exists" in message

    deleted = api.delete(f"/audiences/{aid}/contacts/raw%40example.org").json()
    assert deleted == {"object": "contact", "id": raw_id, "contact": raw_id, "deleted": True}
    assert resend.Contacts.remove(audience_id=aid, id=via_sdk["id"])["deleted"] is True
    assert api.get(f"/audiences/{aid}/contacts").json()["data"] == []
    refusal(api.get(f"/audiences/{aid}/contacts/raw@example.org"), 404, "not_found")
    unknown = "0192f000-0000-7000-8000-000000000000"
    assert "Audience not found" in refusal(
        api.get(f"/audiences/{unknown}/contacts"), 404, "not_found"
    )


def test_every_refusal_in_the_documented_shape(team_server: LiveServer, api: httpx.Client) -> None:
    api.post("/contact-properties", json={"key": "age", "type": "number"})
    segment = api.post("/segments", json={"name": "S"}).json()
    ada = api.post("/contacts", json={"email": "ada@example.org"}).json()

    refusal(api.post("/contacts", json={}), 422, "missing_required_field")
    for bad in ("not an address", "a@localhost", 42):
        refusal(api.post("/contacts", json={"email": bad}), 422)
    assert "`plan`" in refusal(
        api.post("/contacts", json={"email": "b@example.org", "properties": {"plan": "pro"}}), 422
    )
    assert "`age`" in refusal(
        api.post("/contacts", json={"email": "b@example.org", "properties": {"age": "old"}}), 422
    )
    refusal(
        api.post("/contacts", json={"email": "b@example.org", "properties": {"age": True}}), 422
    )
    refusal(api.post("/contacts", json={"email": "b@example.org", "unsubscribed": "yes"}), 422)
    refusal(api.post("/contacts", json={"email": "b@example.org", "first_name": 7}), 422)
    refusal(api.post("/contacts", json={"email": "b@example.org", "segments": "x"}), 422)
    refusal(
        api.post(
            "/contacts",
            json={"email": "b@example.org", "topics": [{"id": segment["id"], "subscription": "x"}]},
        ),
        422,
    )
    unknown = "0192f000-0000-7000-8000-000000000000"
    refusal(
        api.post("/contacts", json={"email": "b@example.org", "segments": [unknown]}),
        404,
        "not_found",
    )
    assert "already exists" in refusal(
        api.post("/contacts", json={"email": "ADA@example.org"}), 422
    )
    api.post("/contacts", json={"email": "b@example.org"})
    refusal(api.patch(f"/contacts/{ada['id']}", json={"email": "b@example.org"}), 422)
    refusal(api.patch(f"/contacts/{ada['id']}", json={"properties": {"age": "x"}}), 422)

    refusal(api.get("/contacts/nobody@example.org"), 404, "not_found")
    refusal(api.get(f"/contacts/{unknown}"), 404, "not_found")
    refusal(api.delete("/contacts/nobody@example.org"), 404, "not_found")
    refusal(api.get("/contacts", params={"limit": 0}), 422)
    refusal(api.get("/contacts", params={"after": unknown}), 422)
    refusal(api.get("/contacts", params={"after": ada["id"], "before": ada["id"]}), 422)
    refusal(api.get("/contacts", params={"segment_id": unknown}), 404, "not_found")
    refusal(api.post("/contacts", content=b"{", headers={"Content-Type": "application/json"}), 400)

    # Another team sees none of it, and cannot use the first team's segment.
    stranger = {"Authorization": f"Bearer {team_server.create_key('s', new_team='other')}"}
    with httpx.Client(base_url=team_server.base_url, headers=stranger) as other:
        assert other.get("/contacts").json()["data"] == []
        refusal(other.get(f"/contacts/{ada['id']}"), 404, "not_found")
        refusal(other.get("/contacts/ada@example.org"), 404, "not_found")
        refusal(other.patch(f"/contacts/{ada['id']}", json={"first_name": "X"}), 404, "not_found")
        refusal(other.delete(f"/contacts/{ada['id']}"), 404, "not_found")
        refusal(
            other.post("/contacts", json={"email": "c@example.org", "segments": [segment["id"]]}),
            404,
            "not_found",
        )
        refusal(other.get("/contacts", params={"segment_id": segment["id"]}), 404, "not_found")
        # The same address is another contact in another team.
        assert other.post("/contacts", json={"email": "ada@example.org"}).status_code == 201
    assert resend.Contacts.get(email="ada@example.org")["id"] == ada["id"]


def test_contact_webhooks_arrive_signed(team_server: LiveServer) -> None:
    receiver = WebhookReceiver()
    receiver.start()
    try:
        hook = resend.Webhooks.create(
            {
                "endpoint": receiver.url,
                "events": ["contact.created", "contact.updated", "contact.deleted"],
            }
        )
        segment = resend.Segments.create({"name": "News"})
        topic = resend.Topics.create({"name": "Weekly", "default_subscription": "opt_in"})
        contact = resend.Contacts.create(
            {"email": "ada@example.org", "first_name": "Ada", "segments": [segment["id"]]}
        )
        resend.Contacts.update({"id": contact["id"], "unsubscribed": True})
        resend.Contacts.Topics.update(
            {"id": contact["id"], "topics": [{"id": topic["id"], "subscription": "opt_out"}]}
        )
        resend.Contacts.remove(id=contact["id"])
        wait_until(lambda: len(receiver.posts()) >= 4, "four contact webhooks")
    finally:
        receiver.stop()
    verifier = Webhook(hook["signing_secret"])
    events: list[dict[str, Any]] = []
    for post in receiver.posts():
        headers = {k.lower(): v for k, v in post.headers.items()}
        verifier.verify(post.body, headers)
        events.append(json.loads(post.body))
    events.sort(key=lambda e: e["created_at"])
    kinds = [e["type"] for e in events]
    assert sorted(kinds) == sorted(
        ["contact.created", "contact.updated", "contact.updated", "contact.deleted"]
    )
    data = next(e["data"] for e in events if e["data"]["unsubscribed"])
    assert data["id"] == contact["id"] and data["email"] == "ada@example.org"
    assert data["audience_id"] == segment["id"] and data["segment_ids"] == [segment["id"]]
    assert data["first_name"] == "Ada" and "last_name" not in data  # optional in Node's types
    assert data["created_at"].endswith("Z") and data["updated_at"].endswith("Z")
