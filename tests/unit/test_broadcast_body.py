"""The bodies of POST and PATCH /broadcasts: what each sets, and what each refuses."""

from typing import Any

import pytest

from postwire.api.broadcast_body import broadcast_fields, names_a_change, send_flag
from postwire.errors import ApiError

SEGMENT = "01a2103b-b3c4-75e3-b94e-40404c8aa1db"
TOPIC = "01a2103b-b3c4-75e3-b94e-403f394720b5"
BODY = {"segment_id": SEGMENT, "from": "News <n@example.com>", "subject": "Hi"}


def test_a_create_body_sets_the_record_fields() -> None:
    fields = broadcast_fields(
        {**BODY, "reply_to": "a@example.com", "html": "<p>x</p>", "name": "N",
         "preview_text": "P", "topic_id": TOPIC.upper(), "broadcast_id": "ignored"},
        creating=True,
    )  # fmt: skip
    assert fields == {
        "segment_id": SEGMENT, "sender": "News <n@example.com>", "subject": "Hi",
        "reply_to": ["a@example.com"], "html": "<p>x</p>", "name": "N", "preview_text": "P",
        "topic_id": TOPIC,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"audience_id": SEGMENT}, {"segment_id": SEGMENT}),
        ({"audience_id": TOPIC, "segment_id": SEGMENT}, {"segment_id": SEGMENT}),
        ({"topic_id": None}, {"topic_id": None}),
        ({"name": None}, {"name": ""}),
        ({"text": ""}, {"text": None}),
        ({"reply_to": ["a@example.com", "B <b@example.com>"]},
         {"reply_to": ["a@example.com", "B <b@example.com>"]}),
        ({"reply_to": None}, {"reply_to": []}),
        ({}, {}),
    ],
)  # fmt: skip
def test_an_update_sets_only_what_it_names(body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert broadcast_fields(body, creating=False) == expected


@pytest.mark.parametrize(
    ("body", "status", "name", "words"),
    [
        ({**BODY, "segment_id": None}, 422, "missing_required_field", "`segment_id`"),
        ({**BODY, "from": ""}, 422, "missing_required_field", "`from`"),
        ({**BODY, "subject": None}, 422, "missing_required_field", "`subject`"),
        ({**BODY, "segment_id": "seg_1"}, 422, "validation_error", "UUID"),
        ({**BODY, "from": "no address"}, 422, "validation_error", "`from`"),
        ({**BODY, "from": 7}, 422, "validation_error", "`from`"),
        ({**BODY, "subject": "a\r\nBcc: x@y.z"}, 422, "validation_error", "`subject`"),
        ({**BODY, "reply_to": ["ok@example.com", "not one"]}, 422, "validation_error", "reply_to"),
        ({**BODY, "reply_to": [f"r{n}@example.com" for n in range(51)]}, 422, "validation_error",
         "50"),
        ({**BODY, "html": 3}, 422, "validation_error", "`html`"),
        ({**BODY, "text": "a\0b"}, 422, "validation_error", "`text`"),
        ({**BODY, "topic_id": "t"}, 422, "validation_error", "UUID"),
        ({**BODY, "name": "n" * 257}, 422, "validation_error", "`name`"),
    ],
)  # fmt: skip
def test_refusals(body: dict[str, Any], status: int, name: str, words: str) -> None:
    with pytest.raises(ApiError) as refused:
        broadcast_fields(body, creating=True)
    assert (refused.value.status, refused.value.name) == (status, name)
    assert words in refused.value.message


def test_an_update_may_not_empty_a_required_field() -> None:
    with pytest.raises(ApiError, match="`subject`"):
        broadcast_fields({"subject": None}, creating=False)
    with pytest.raises(ApiError, match="`from`"):
        broadcast_fields({"from": ""}, creating=False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, (False, None)),
        ({"send": None}, (False, None)),
        ({"send": True}, (True, None)),
        ({"send": True, "scheduled_at": "in 1 hour"}, (True, "in 1 hour")),
    ],
)
def test_send_flag(body: dict[str, Any], expected: tuple[bool, str | None]) -> None:
    assert send_flag(body) == expected


@pytest.mark.parametrize(
    "body", [{"send": "yes"}, {"scheduled_at": "in 1 hour"}, {"send": True, "scheduled_at": 5}]
)
def test_send_flag_refusals(body: dict[str, Any]) -> None:
    with pytest.raises(ApiError):
        send_flag(body)


def test_a_patch_must_name_a_change() -> None:
    assert not names_a_change({"broadcast_id": SEGMENT})
    assert names_a_change({"topic_id": None})
