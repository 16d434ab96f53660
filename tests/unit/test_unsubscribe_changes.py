"""What unsubscribing, subscribing again and saving preferences change on a contact."""

from __future__ import annotations

from dataclasses import replace

import pytest

from postwire.store.contacts import ContactRecord
from postwire.store.topics import TopicRecord
from postwire.unsubscribe.changes import (
    Standing,
    resubscribed,
    standing,
    unsubscribed,
    with_preferences,
)

BEFORE, NOW = "2025-01-01 00:00:00.000000+00", "2025-02-01 00:00:00.000000+00"
CONTACT = ContactRecord(
    id="c1", team_id="t1", email="ann@example.com", first_name=None, last_name=None,
    unsubscribed=False, created_at=BEFORE, updated_at=BEFORE,
)  # fmt: skip


def _topic(topic_id: str, default: str, visibility: str = "public") -> TopicRecord:
    return TopicRecord(topic_id, "t1", topic_id.title(), None, default, visibility, BEFORE)


NEWS = _topic("news", "opt_in")
OFFERS = _topic("offers", "opt_out")
GONE = replace(CONTACT, unsubscribed=True)


@pytest.mark.parametrize(
    ("contact", "topic", "expected"),
    [
        (CONTACT, None, Standing.SUBSCRIBED),
        (GONE, None, Standing.UNSUBSCRIBED),
        (GONE, NEWS, Standing.UNSUBSCRIBED),  # the global opt-out wins over any topic
        (CONTACT, NEWS, Standing.SUBSCRIBED),  # the topic's default
        (CONTACT, OFFERS, Standing.OPTED_OUT),
        (replace(CONTACT, topics={"news": "opt_out"}), NEWS, Standing.OPTED_OUT),
        (replace(CONTACT, topics={"offers": "opt_in"}), OFFERS, Standing.SUBSCRIBED),
    ],
)
def test_standing(contact: ContactRecord, topic: TopicRecord | None, expected: Standing) -> None:
    assert standing(contact, topic) is expected


@pytest.mark.parametrize(
    ("contact", "topic", "expected"),
    [
        (CONTACT, None, replace(CONTACT, unsubscribed=True, updated_at=NOW)),
        (GONE, None, None),  # twice: nothing to write, no webhook
        # A topic's broadcast opts out of that topic only; other choices stay.
        (
            replace(CONTACT, topics={"offers": "opt_in"}),
            NEWS,
            replace(CONTACT, topics={"offers": "opt_in", "news": "opt_out"}, updated_at=NOW),
        ),
        (replace(CONTACT, topics={"news": "opt_out"}), NEWS, None),
        (CONTACT, OFFERS, None),  # opted out by the topic's default already
        (GONE, NEWS, None),
    ],
)
def test_unsubscribed(
    contact: ContactRecord, topic: TopicRecord | None, expected: ContactRecord | None
) -> None:
    assert unsubscribed(contact, topic, NOW) == expected


@pytest.mark.parametrize(
    ("contact", "topic", "expected"),
    [
        (GONE, None, replace(CONTACT, updated_at=NOW)),
        # Lifting the global opt-out keeps the topic choices as they were.
        (
            replace(GONE, topics={"news": "opt_out"}),
            NEWS,
            replace(CONTACT, topics={"news": "opt_out"}, updated_at=NOW),
        ),
        (
            replace(CONTACT, topics={"news": "opt_out"}),
            NEWS,
            replace(CONTACT, topics={"news": "opt_in"}, updated_at=NOW),
        ),
        (CONTACT, OFFERS, replace(CONTACT, topics={"offers": "opt_in"}, updated_at=NOW)),
        (CONTACT, None, None),
        (CONTACT, NEWS, None),
    ],
)
def test_resubscribed(
    contact: ContactRecord, topic: TopicRecord | None, expected: ContactRecord | None
) -> None:
    assert resubscribed(contact, topic, NOW) == expected


@pytest.mark.parametrize(
    ("contact", "chosen", "expected_topics"),
    [
        (CONTACT, {"news"}, None),  # the defaults already: nothing written
        (CONTACT, set(), {"news": "opt_out"}),
        (CONTACT, {"news", "offers"}, {"offers": "opt_in"}),
        (replace(CONTACT, topics={"news": "opt_out"}), {"news"}, {"news": "opt_in"}),
        # Ids of topics not on the page (private, another team's, made up) change nothing.
        (CONTACT, {"news", "secret", "nonsense"}, None),
        (replace(CONTACT, topics={"secret": "opt_in"}), {"news"}, None),
    ],
)
def test_with_preferences(
    contact: ContactRecord, chosen: set[str], expected_topics: dict[str, str] | None
) -> None:
    changed = with_preferences(contact, [NEWS, OFFERS], chosen, NOW)
    if expected_topics is None:
        assert changed is None
    else:
        assert changed == replace(
            contact, topics={**contact.topics, **expected_topics}, updated_at=NOW
        )
