"""The pure rules of broadcasts: statuses, skips, pace, preview text."""

import pytest

from postwire.broadcasts.rules import (
    ALLOWED,
    next_page_at,
    refusal,
    skip_reason,
    status_after_cancel,
    topic_subscription,
    with_preview_text,
)


@pytest.mark.parametrize(
    ("status", "allowed"),
    [
        ("draft", {"update", "delete", "send"}),
        ("scheduled", {"update", "delete", "send", "cancel"}),
        ("queued", {"cancel"}),
        ("sending", {"cancel"}),
        ("sent", set()),
        ("canceled", set()),
    ],
)
def test_what_each_status_allows(status: str, allowed: set[str]) -> None:
    assert {action for action in ALLOWED if refusal(status, action) is None} == allowed


def test_a_refusal_names_what_is_allowed_and_what_the_broadcast_is() -> None:
    assert refusal("sent", "update") == (
        "Only draft or scheduled broadcasts can be updated; this broadcast is `sent`."
    )
    assert refusal("draft", "cancel") == (
        "Only scheduled, queued or sending broadcasts can be canceled; this broadcast is `draft`."
    )


@pytest.mark.parametrize(
    ("status", "after"), [("scheduled", "draft"), ("queued", "canceled"), ("sending", "canceled")]
)
def test_cancel_makes_a_scheduled_broadcast_a_draft_and_stops_the_others(
    status: str, after: str
) -> None:
    assert status_after_cancel(status) == after


@pytest.mark.parametrize(
    ("unsubscribed", "topic", "suppressed", "reason"),
    [
        (False, None, False, None),
        (False, "opt_in", False, None),
        (True, None, False, "skipped_unsubscribed"),
        (True, "opt_out", True, "skipped_unsubscribed"),
        (False, "opt_out", False, "skipped_topic"),
        (False, "opt_out", True, "skipped_topic"),
        (False, None, True, "suppressed"),
        (False, "opt_in", True, "suppressed"),
    ],
)
def test_each_skipped_member_is_counted_for_one_reason(
    unsubscribed: bool, topic: str | None, suppressed: bool, reason: str | None
) -> None:
    found = skip_reason(unsubscribed=unsubscribed, topic_subscription=topic, suppressed=suppressed)
    assert found == reason


@pytest.mark.parametrize(
    ("explicit", "default", "expected"),
    [
        ({}, "opt_in", "opt_in"),
        ({}, "opt_out", "opt_out"),
        ({"t": "opt_in"}, "opt_out", "opt_in"),
        ({"t": "opt_out"}, "opt_in", "opt_out"),
        ({"other": "opt_out"}, "opt_in", "opt_in"),
        # The topic was deleted: explicit choices still count, nobody else is skipped.
        ({}, None, "opt_in"),
        ({"t": "opt_out"}, None, "opt_out"),
    ],
)
def test_topic_subscription(explicit: dict[str, str], default: str | None, expected: str) -> None:
    assert topic_subscription(explicit, "t", default) == expected


@pytest.mark.parametrize(
    ("previous", "now", "messages", "rate", "expected"),
    [
        (0.0, 10.0, 500, 1000, 10.5),  # idle time is not saved up
        (10.5, 10.1, 500, 1000, 11.0),  # ahead of the pace: the next page waits
        (10.0, 12.0, 0, 1000, 12.0),  # nothing enqueued: no wait
        (5.0, 5.0, 200, 5000, 5.04),
    ],
)
def test_pace(previous: float, now: float, messages: int, rate: int, expected: float) -> None:
    assert next_page_at(previous, now, messages, rate) == pytest.approx(expected)


def test_preview_text_is_the_first_hidden_element_of_the_body() -> None:
    html = '<html><head></head><BODY class="x"><p>Hi</p></BODY></html>'
    shown = with_preview_text(html, "Sale <today> & {{{FIRST_NAME}}}")
    assert shown.startswith('<html><head></head><BODY class="x"><div style="display:none;')
    assert "Sale &lt;today&gt; &amp; {{{FIRST_NAME}}}</div><p>Hi</p>" in shown
    assert with_preview_text("<p>Hi</p>", "P").endswith("P</div><p>Hi</p>")
    assert with_preview_text(html, None) == html
    assert with_preview_text(html, "") == html
