"""Segments (and the audiences alias), topics and contact properties against a live
`postwire serve`: every call of the official Python SDK, raw HTTP for every refusal, and team
isolation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import resend

from tests.e2e.conftest import LiveServer
from tests.e2e.test_contacts import api, fields, refusal

__all__ = ["api"]  # the fixture, shared with the contacts tests

UNKNOWN = "0192f000-0000-7000-8000-000000000000"


def ids(listed: Any) -> list[str]:
    return [item["id"] for item in listed["data"]]


def test_the_sdk_manages_segments_and_memberships(api: httpx.Client) -> None:
    news = resend.Segments.create({"name": "News"})
    assert fields(news) == {"object": "segment", "id": news["id"], "name": "News"}
    promo = resend.Segments.create({"name": "Promo"})
    got = fields(resend.Segments.get(news["id"]))
    assert got["object"] == "segment" and got["name"] == "News" and got["created_at"]
    assert ids(resend.Segments.list()) == [promo["id"], news["id"]]
    page = resend.Segments.list({"limit": 1})
    assert ids(page) == [promo["id"]] and page["has_more"] is True
    assert ids(resend.Segments.list({"limit": 1, "after": promo["id"]})) == [news["id"]]
    assert resend.Segments.update(news["id"], {"name": "Weekly news"})["id"] == news["id"]
    assert resend.Segments.get(news["id"])["name"] == "Weekly news"

    ada = resend.Contacts.create({"email": "ada@example.org"})
    added = fields(
        resend.Contacts.Segments.add({"segment_id": news["id"], "email": "ada@example.org"})
    )
    assert added == {
        "object": "contact_segment",
        "id": news["id"],
        "contact_id": ada["id"],
        "segment_id": news["id"],
    }
    resend.Contacts.Segments.add({"segment_id": promo["id"], "contact_id": ada["id"]})
    resend.Contacts.Segments.add({"segment_id": promo["id"], "contact_id": ada["id"]})  # again
    mine = resend.Contacts.Segments.list({"contact_id": ada["id"]})
    assert ids(mine) == [promo["id"], news["id"]]
    assert set(mine["data"][0]) == {"id", "name", "created_at"}
    # The Rust SDK asks with a trailing slash.
    assert ids(api.get(f"/contacts/{ada['id']}/segments/").json()) == ids(mine)
    assert ids(resend.Contacts.list(segment_id=promo["id"])) == [ada["id"]]
    assert ids(api.get(f"/segments/{promo['id']}/contacts").json()) == [ada["id"]]

    removed = fields(
        resend.Contacts.Segments.remove({"segment_id": promo["id"], "email": "ada@example.org"})
    )
    assert removed["deleted"] is True and removed["id"] == promo["id"]
    assert resend.Contacts.list(segment_id=promo["id"])["data"] == []
    refusal(api.delete(f"/contacts/{ada['id']}/segments/{promo['id']}"), 404, "not_found")

    # Deleting a segment takes its members out of it; the contacts stay.
    deleted = fields(resend.Segments.remove(news["id"]))
    assert deleted == {"object": "segment", "id": news["id"], "deleted": True}
    assert resend.Contacts.Segments.list({"contact_id": ada["id"]})["data"] == []
    assert resend.Contacts.get(id=ada["id"])["email"] == "ada@example.org"
    refusal(api.get(f"/segments/{news['id']}"), 404, "not_found")
    refusal(api.get(f"/segments/{news['id']}/contacts"), 404, "not_found")
    assert ids(resend.Segments.list()) == [promo["id"]]


def test_audiences_are_segments_under_their_old_name(api: httpx.Client) -> None:
    made = api.post("/audiences", json={"name": "Old"})
    assert made.status_code == 201
    audience = made.json()
    assert audience == {"object": "audience", "id": audience["id"], "name": "Old"}
    one = api.get(f"/audiences/{audience['id']}").json()
    assert one["object"] == "audience" and one["name"] == "Old"
    assert api.get(f"/segments/{audience['id']}").json()["object"] == "segment"
    assert ids(api.get("/audiences").json()) == [audience["id"]]
    with pytest.deprecated_call():
        assert ids(resend.Audiences.list()) == [audience["id"]]
        assert resend.Audiences.get(audience["id"])["name"] == "Old"
    gone = api.delete(f"/audiences/{audience['id']}").json()
    assert gone == {"object": "audience", "id": audience["id"], "deleted": True}
    assert "Audience not found" in refusal(
        api.get(f"/audiences/{audience['id']}"), 404, "not_found"
    )


def test_the_sdk_manages_topics_and_subscriptions(api: httpx.Client) -> None:
    weekly = resend.Topics.create(
        {"name": "Weekly", "default_subscription": "opt_in", "description": "Our weekly letter"}
    )
    launches = resend.Topics.create({"name": "Launches", "default_subscription": "opt_out"})
    topic = fields(resend.Topics.get(weekly["id"]))
    assert topic == {
        "object": "topic",
        "id": weekly["id"],
        "name": "Weekly",
        "description": "Our weekly letter",
        "default_subscription": "opt_in",
        "visibility": "private",
        "created_at": topic["created_at"],
    }
    assert ids(resend.Topics.list()) == [launches["id"], weekly["id"]]
    assert ids(resend.Topics.list({"limit": 1, "after": launches["id"]})) == [weekly["id"]]
    resend.Topics.update(weekly["id"], {"name": "Weekly letter"})
    # The Rust SDK sends `"name": null` with the fields it changes.
    api.patch(f"/topics/{weekly['id']}", json={"name": None, "visibility": "public"})
    changed = resend.Topics.get(weekly["id"])
    assert changed["name"] == "Weekly letter" and changed["visibility"] == "public"
    assert changed["description"] == "Our weekly letter"

    ada = resend.Contacts.create({"email": "ada@example.org"})
    listed = resend.Contacts.Topics.list(contact_id=ada["id"])
    assert {t["id"]: t["subscription"] for t in listed["data"]} == {
        weekly["id"]: "opt_in",
        launches["id"]: "opt_out",
    }
    assert set(listed["data"][0]) == {"id", "name", "description", "subscription", "created_at"}
    updated = fields(
        resend.Contacts.Topics.update(
            {
                "email": "ada@example.org",
                "topics": [
                    {"id": weekly["id"], "subscription": "opt_out"},
                    {"id": launches["id"], "subscription": "opt_in"},
                ],
            }
        )
    )
    assert updated["id"] == ada["id"] and updated["object"] == "contact_topics"
    # The documented body wraps the array in an object.
    wrapped = api.patch(
        f"/contacts/{ada['id']}/topics",
        json={"topics": [{"id": weekly["id"], "subscription": "opt_out"}]},
    )
    assert wrapped.status_code == 200, wrapped.text
    listed = resend.Contacts.Topics.list(email="ada@example.org")
    assert {t["id"]: t["subscription"] for t in listed["data"]} == {
        weekly["id"]: "opt_out",
        launches["id"]: "opt_in",
    }

    removed = fields(resend.Topics.remove(launches["id"]))
    assert removed == {"object": "topic", "id": launches["id"], "deleted": True}
    assert ids(resend.Contacts.Topics.list(contact_id=ada["id"])) == [weekly["id"]]


def test_topic_refusals(api: httpx.Client) -> None:
    topic = api.post("/topics", json={"name": "T", "default_subscription": "opt_in"}).json()
    refusal(
        api.post("/topics", json={"default_subscription": "opt_in"}), 422, "missing_required_field"
    )
    refusal(api.post("/topics", json={"name": "T"}), 422, "missing_required_field")
    refusal(api.post("/topics", json={"name": "x" * 51, "default_subscription": "opt_in"}), 422)
    refusal(api.post("/topics", json={"name": "T", "default_subscription": "maybe"}), 422)
    refusal(
        api.post(
            "/topics",
            json={"name": "T", "default_subscription": "opt_in", "description": "d" * 201},
        ),
        422,
    )
    refusal(
        api.post(
            "/topics", json={"name": "T", "default_subscription": "opt_in", "visibility": "secret"}
        ),
        422,
    )
    assert "cannot be changed" in refusal(
        api.patch(f"/topics/{topic['id']}", json={"default_subscription": "opt_out"}), 422
    )
    refusal(api.patch(f"/topics/{topic['id']}", json={}), 422, "missing_required_field")
    refusal(api.get(f"/topics/{UNKNOWN}"), 404, "not_found")
    refusal(api.get("/topics", params={"limit": 101}), 422)
    ada = api.post("/contacts", json={"email": "ada@example.org"}).json()
    refusal(
        api.patch(
            f"/contacts/{ada['id']}/topics", json=[{"id": UNKNOWN, "subscription": "opt_in"}]
        ),
        404,
        "not_found",
    )
    refusal(api.patch(f"/contacts/{ada['id']}/topics", json=[{"id": topic["id"]}]), 422)
    refusal(api.patch(f"/contacts/{ada['id']}/topics", json={}), 422, "missing_required_field")
    refusal(api.get("/contacts/nobody@example.org/topics"), 404, "not_found")


def test_the_sdk_manages_contact_properties(api: httpx.Client) -> None:
    plan = resend.ContactProperties.create(
        {"key": "plan", "type": "string", "fallback_value": "free"}
    )
    age = resend.ContactProperties.create({"key": "age", "type": "number"})
    got = fields(resend.ContactProperties.get(plan["id"]))
    assert got == {
        "object": "contact_property",
        "id": plan["id"],
        "key": "plan",
        "type": "string",
        "fallback_value": "free",
        "created_at": got["created_at"],
    }
    listed = resend.ContactProperties.list()
    assert ids(listed) == [age["id"], plan["id"]]
    assert listed["data"][0]["fallback_value"] is None
    assert ids(resend.ContactProperties.list({"limit": 1})) == [age["id"]]
    resend.ContactProperties.update({"id": age["id"], "fallback_value": 18.5})
    assert resend.ContactProperties.get(age["id"])["fallback_value"] == 18.5
    resend.ContactProperties.update({"id": plan["id"], "fallback_value": None})
    assert resend.ContactProperties.get(plan["id"])["fallback_value"] is None

    refusal(api.post("/contact-properties", json={"key": "plan", "type": "string"}), 422)
    refusal(api.post("/contact-properties", json={"type": "string"}), 422, "missing_required_field")
    for key in ("has space", "dash-ed", "x" * 51, "", "é"):
        refusal(api.post("/contact-properties", json={"key": key, "type": "string"}), 422)
    refusal(api.post("/contact-properties", json={"key": "k", "type": "boolean"}), 422)
    refusal(
        api.post("/contact-properties", json={"key": "k", "type": "number", "fallback_value": "1"}),
        422,
    )
    refusal(
        api.post("/contact-properties", json={"key": "k", "type": "string", "fallback_value": 1}),
        422,
    )
    refusal(api.patch(f"/contact-properties/{age['id']}", json={"fallback_value": "x"}), 422)
    refusal(
        api.patch(f"/contact-properties/{age['id']}", json={"key": "years", "fallback_value": 1}),
        422,
    )
    refusal(api.patch(f"/contact-properties/{age['id']}", json={}), 422, "missing_required_field")
    # Keys are case-sensitive.
    assert api.post("/contact-properties", json={"key": "Plan", "type": "string"}).is_success

    removed = fields(resend.ContactProperties.remove(age["id"]))
    assert removed == {"object": "contact_property", "id": age["id"], "deleted": True}
    refusal(api.get(f"/contact-properties/{age['id']}"), 404, "not_found")
    # The key is free again, and may come back with another type.
    assert api.post("/contact-properties", json={"key": "age", "type": "string"}).is_success


def test_another_team_sees_none_of_it(team_server: LiveServer, api: httpx.Client) -> None:
    segment = api.post("/segments", json={"name": "S"}).json()
    topic = api.post("/topics", json={"name": "T", "default_subscription": "opt_in"}).json()
    prop = api.post("/contact-properties", json={"key": "plan", "type": "string"}).json()
    stranger = {"Authorization": f"Bearer {team_server.create_key('s', new_team='other')}"}
    with httpx.Client(base_url=team_server.base_url, headers=stranger) as other:
        for path in ("/segments", "/audiences", "/topics", "/contact-properties"):
            assert other.get(path).json()["data"] == [], path
        for path in (
            f"/segments/{segment['id']}",
            f"/audiences/{segment['id']}",
            f"/segments/{segment['id']}/contacts",
            f"/topics/{topic['id']}",
            f"/contact-properties/{prop['id']}",
        ):
            refusal(other.get(path), 404, "not_found")
            refusal(other.delete(path.removesuffix("/contacts")), 404, "not_found")
        refusal(other.patch(f"/segments/{segment['id']}", json={"name": "X"}), 404, "not_found")
        refusal(other.patch(f"/topics/{topic['id']}", json={"name": "X"}), 404, "not_found")
        refusal(
            other.patch(f"/contact-properties/{prop['id']}", json={"fallback_value": "x"}),
            404,
            "not_found",
        )
        mine = other.post("/contacts", json={"email": "me@example.org"}).json()
        refusal(other.post(f"/contacts/{mine['id']}/segments/{segment['id']}"), 404, "not_found")
        refusal(
            other.patch(
                f"/contacts/{mine['id']}/topics",
                json=[{"id": topic["id"], "subscription": "opt_in"}],
            ),
            404,
            "not_found",
        )
        refusal(
            other.post("/contacts", json={"email": "x@example.org", "properties": {"plan": "pro"}}),
            422,
        )
        refusal(
            other.post(f"/audiences/{segment['id']}/contacts", json={"email": "y@example.org"}),
            404,
            "not_found",
        )
    assert api.get(f"/segments/{segment['id']}").is_success
    assert api.get(f"/topics/{topic['id']}").is_success
