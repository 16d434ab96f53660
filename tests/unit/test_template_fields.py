"""The fields of a template's create and update bodies, and the versions a publish makes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from postwire.errors import ApiError
from postwire.store.templates import TemplateRecord, publish
from postwire.templates.fields import (
    template_alias,
    template_html,
    template_name,
    template_reply_to,
    template_sender,
    template_subject,
    variable_records,
)
from postwire.templates.variables import DeclaredVariable

ACCEPTED: list[tuple[Callable[[object], object], object, object]] = [
    (template_name, "Welcome", "Welcome"),
    (template_name, "n" * 256, "n" * 256),
    (template_alias, None, None),
    (template_alias, "order-confirmation", "order-confirmation"),
    (template_alias, "alias updated", "alias updated"),  # resend-rs's own test uses a space
    (template_alias, "a" * 100, "a" * 100),
    (template_html, "", ""),
    (template_html, "<p>é</p>", "<p>é</p>"),
    (template_subject, None, None),
    (template_subject, "Hi\t{{{NAME}}}", "Hi\t{{{NAME}}}"),
    (template_sender, None, None),
    (template_sender, "Shop <shop@example.com>", "Shop <shop@example.com>"),
    (template_reply_to, None, None),
    (template_reply_to, [], None),
    (template_reply_to, "a@example.com", ["a@example.com"]),
    (template_reply_to, ["A <a@example.com>", "b@example.com"],
     ["A <a@example.com>", "b@example.com"]),
]  # fmt: skip

REFUSED: list[tuple[Callable[[object], object], object, str]] = [
    (template_name, "", "non-empty"),
    (template_name, "  ", "non-empty"),
    (template_name, 5, "non-empty"),
    (template_name, "n" * 257, "at most 256"),
    (template_alias, "", "non-empty"),
    (template_alias, "a" * 101, "at most 100"),
    (template_alias, "a/b", "without `/`"),
    (template_alias, "a?b", "without `/`"),
    (template_alias, "a#b", "without `/`"),
    (template_alias, "50%", "without `/`"),
    (template_alias, " padded", "surrounding spaces"),
    (template_alias, "tab\there", "printable"),
    (template_alias, "0190a2b4-7c1d-7e2f-8a3b-4c5d6e7f8091", "look like a template id"),
    (template_html, None, "must be a string"),
    (template_html, "a\0b", "without NUL"),
    (template_html, "\ud800", "valid Unicode"),
    (template_subject, "a\nb", "line breaks"),
    (template_subject, "a\x07b", "line breaks or controls"),
    (template_subject, 1, "must be a string"),
    (template_sender, "nobody", "Invalid `from`"),
    (template_sender, ["a@example.com"], "Invalid `from`"),
    (template_reply_to, ["ok@example.com", "nope"], "Invalid `reply_to`"),
    (template_reply_to, [1], "string or an array"),
    (template_reply_to, [f"r{i}@example.com" for i in range(51)], "at most 50"),
]


@pytest.mark.parametrize(("check", "value", "expected"), ACCEPTED)
def test_accepted(check: Callable[[object], object], value: object, expected: object) -> None:
    assert check(value) == expected


@pytest.mark.parametrize(("check", "value", "text"), REFUSED)
def test_refused(check: Callable[[object], object], value: object, text: str) -> None:
    with pytest.raises(ApiError) as raised:
        check(value)
    assert (raised.value.status, raised.value.name) == (422, "validation_error")
    assert text in raised.value.message


def test_variable_records_keep_identity_across_updates() -> None:
    first = variable_records(
        [DeclaredVariable("A", "string", "x"), DeclaredVariable("B", "number", None)], [], "t1"
    )
    assert [(v["key"], v["created_at"], v["updated_at"]) for v in first] == [
        ("A", "t1", "t1"),
        ("B", "t1", "t1"),
    ]
    second = variable_records(
        [DeclaredVariable("B", "number", 2), DeclaredVariable("A", "string", "x")], first, "t2"
    )
    assert [(v["key"], v["created_at"], v["updated_at"]) for v in second] == [
        ("B", "t1", "t2"),  # its fallback changed
        ("A", "t1", "t1"),
    ]
    assert [v["id"] for v in second] == [first[1]["id"], first[0]["id"]]


def test_publish_freezes_the_working_copy() -> None:
    draft = TemplateRecord(
        id="t", team_id="team", name="n", alias=None, sender=None, subject="s",
        reply_to=None, html="<p/>", text=None, variables=[], created_at="c", updated_at="c",
        current_version_id="v1",
    )  # fmt: skip
    assert (draft.status, draft.has_unpublished_versions) == ("draft", True)
    version, published = publish(draft, "p1")
    assert (version.id, version.number, version.published_at, version.subject) == (
        "v1", 1, "p1", "s"
    )  # fmt: skip
    assert (published.status, published.has_unpublished_versions) == ("published", False)
    assert (published.published_version_id, published.published_at, published.versions) == (
        "v1", "p1", 1
    )  # fmt: skip
