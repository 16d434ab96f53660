"""The pure rules of contact, topic and contact property bodies, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from postwire.audiences.contact_rules import (
    contact_changes,
    contact_email,
    fallback_value,
    property_changes,
    property_key,
    segment_ids,
    topic_choices,
)
from postwire.errors import ApiError
from postwire.store.contact_properties import ContactPropertyRecord
from postwire.store.contacts import ContactRecord

PROPS = {
    "plan": ContactPropertyRecord("p1", "t", "plan", "string", "free", "x"),
    "age": ContactPropertyRecord("p2", "t", "age", "number", None, "x"),
}
ADA = ContactRecord(
    "c1",
    "t",
    "ada@example.org",
    "Ada",
    None,
    False,
    "x",
    "x",
    properties={"plan": "pro", "age": 36},
)


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(ApiError) as error:
        call(*args)
    assert error.value.status == 422
    return error.value.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("ada@example.org", "ada@example.org"),
        (" Ada@Example.org ", "Ada@Example.org"),
        ("a/b+c@example.org", "a/b+c@example.org"),
        ("ada@exämple.org", "ada@exämple.org"),
    ],
)
def test_contact_addresses_accepted(value: str, expected: str) -> None:
    assert contact_email(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "ada",
        "ada@localhost",
        "ada@[192.0.2.1]",
        "Ada <ada@example.org>",
        1,
        None,
        "a b@example.org",
        "ada@example.internal",
    ],
)
def test_contact_addresses_refused(value: object) -> None:
    refused(contact_email, value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, {}),
        ({}, {}),
        ({"plan": "team"}, {"plan": "team"}),
        ({"age": 40.5}, {"age": 40.5}),
        ({"age": None, "plan": None}, {"age": None, "plan": None}),
    ],
)
def test_property_changes_accepted(raw: object, expected: dict[str, object]) -> None:
    assert property_changes(raw, PROPS) == expected


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"nope": "x"}, "`nope`"),
        ({"age": "40"}, "`age`"),
        ({"age": True}, "`age`"),
        ({"plan": 3}, "`plan`"),
        ({"plan": "x" * 2001}, "`plan`"),
        ([1], "`properties`"),
    ],
)
def test_property_changes_refused_naming_the_key(raw: object, named: str) -> None:
    assert named in refused(property_changes, raw, PROPS)


@pytest.mark.parametrize(
    ("body", "first", "last", "unsubscribed", "properties"),
    [
        ({}, "Ada", None, False, {"plan": "pro", "age": 36}),
        ({"first_name": None}, None, None, False, {"plan": "pro", "age": 36}),
        ({"last_name": "L", "unsubscribed": True}, "Ada", "L", True, {"plan": "pro", "age": 36}),
        ({"unsubscribed": None}, "Ada", None, False, {"plan": "pro", "age": 36}),
        ({"properties": {"age": None}}, "Ada", None, False, {"plan": "pro"}),
    ],
)
def test_contact_changes(
    body: dict[str, Any],
    first: str | None,
    last: str | None,
    unsubscribed: bool,
    properties: dict[str, object],
) -> None:
    changed = contact_changes(ADA, body, PROPS)
    assert (changed.first_name, changed.last_name) == (first, last)
    assert changed.unsubscribed is unsubscribed and changed.properties == properties
    assert changed.email == ADA.email


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, []), (["s1", "s2"], ["s1", "s2"]), ([{"id": "s1"}, "s2"], ["s1", "s2"])],
)
def test_segments_are_ids_or_objects(raw: object, expected: list[str]) -> None:
    assert segment_ids(raw) == expected


@pytest.mark.parametrize("raw", ["s1", [1], [{"name": "x"}], [""]])
def test_segments_refused(raw: object) -> None:
    refused(segment_ids, raw)


def test_topic_choices() -> None:
    raw = [{"id": "t1", "subscription": "opt_in"}, {"id": "t2", "subscription": "opt_out"}]
    assert topic_choices(raw) == {"t1": "opt_in", "t2": "opt_out"}
    for bad in ({"id": "t1"}, [{"id": "t1", "subscription": "yes"}], [{"subscription": "opt_in"}]):
        refused(topic_choices, bad)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("plan", True),
        ("Plan_2", True),
        ("x" * 50, True),
        ("x" * 51, False),
        ("", False),
        ("a-b", False),
        ("a b", False),
        ("é", False),
        (None, False),
        (3, False),
    ],
)
def test_property_key_grammar(key: object, ok: bool) -> None:
    if ok:
        assert property_key(key) == key
    else:
        with pytest.raises(ApiError):
            property_key(key)


@pytest.mark.parametrize(
    ("value", "kind", "ok"),
    [
        (None, "string", True),
        ("x", "string", True),
        (1, "string", False),
        (1, "number", True),
        (1.5, "number", True),
        ("1", "number", False),
        (True, "number", False),
    ],
)
def test_fallback_is_of_the_propertys_type(value: object, kind: str, ok: bool) -> None:
    if ok:
        assert fallback_value(value, kind) == value
    else:
        refused(fallback_value, value, kind)
