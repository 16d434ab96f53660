"""The metrics' dimensions beyond team and domain: per broadcast and per tag (with the bound on
the tags a team counts), per recipient domain across teams, and the `metrics.count_events`
switch, over a real spool."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from postwire import _core
from postwire.metrics import counters
from postwire.metrics.counters import OTHER_TAG, Scope, hour_of, tag_label
from postwire.store import metric_counters
from postwire.store.deliveries import add_event
from postwire.store.metric_counters import (
    add_count,
    admit_tags,
    count_first_engagement,
    count_unsubscribed,
    counted_tags,
    list_counted_tags,
    read_counts,
    read_recipient_domain_counts,
    tags_at_bound,
)
from postwire.store.spool import Spool

TEAM = "0190a000-0000-7000-8000-000000000001"
OTHER_TEAM = "0190a000-0000-7000-8000-000000000002"
DOMAIN = "0190a000-0000-7000-8000-0000000000d1"
BROADCAST = "0190a000-0000-7000-8000-0000000000b1"
EMAIL = "0190a000-0000-7000-8000-0000000000e1"
NOW_MS = int(datetime(2026, 11, 25, 10, 30, tzinfo=UTC).timestamp() * 1000)
HOUR = hour_of(NOW_MS)


@pytest.fixture(autouse=True)
def counting_on() -> Iterator[None]:
    yield
    counters.set_event_counting(True)


def counts(spool: Spool, team: str, scope: Scope) -> dict[str, int]:
    return read_counts(spool, team, scope, "hour", HOUR, HOUR + 1).get(HOUR, {})


async def test_an_event_counts_for_its_broadcast_and_each_tag(spool: Spool) -> None:
    batch = _core.WriteBatch()
    tags = admit_tags(batch, spool, TEAM, [{"name": "kind", "value": "welcome"},
                                           {"name": "plan", "value": "pro"}])  # fmt: skip
    assert tags == ("kind:welcome", "plan:pro")
    for kind, data in (
        ("email.sent", {}),
        ("email.delivered", {"to": "a@gmail.test"}),
        ("email.bounced", {"to": "b@gmail.test", "bounce": {"type": "Transient"}}),
    ):
        add_event(batch, TEAM, EMAIL, kind, NOW_MS, domain_id=DOMAIN, broadcast_id=BROADCAST,
                  counted_tags=tags, **data)  # fmt: skip
    add_count(batch, TEAM, DOMAIN, "unsubscribed", NOW_MS, broadcast_id=BROADCAST, tags=tags)
    count_first_engagement(batch, spool, TEAM, DOMAIN, EMAIL, "opened", NOW_MS,
                           broadcast_id=BROADCAST, tags=tags)  # fmt: skip
    await spool.commit(batch)
    expected = {
        "sent": 1, "delivered": 1, "bounced": 1, "bounced_transient": 1, "unsubscribed": 1,
        "unique_opened": 1,
    }  # fmt: skip
    for scope in (
        Scope(),
        Scope("domain", DOMAIN),
        Scope("broadcast", BROADCAST),
        Scope("tag", "kind:welcome"),
        Scope("tag", "plan:pro"),
    ):
        assert counts(spool, TEAM, scope) == expected, scope
    assert counts(spool, TEAM, Scope("tag", "kind:other-value")) == {}
    assert counts(spool, OTHER_TEAM, Scope("broadcast", BROADCAST)) == {}
    assert list_counted_tags(spool, TEAM) == ["kind:welcome", "plan:pro"]


async def test_recipient_domains_count_every_teams_delivery_outcomes(spool: Spool) -> None:
    batch = _core.WriteBatch()
    bounce = {"bounce": {"type": "Permanent"}}
    for team, kind, to, data in (
        (TEAM, "email.delivered", "a@Gmail.test", {}),
        (OTHER_TEAM, "email.delivered", "b@gmail.test", {}),
        (TEAM, "email.delivery_delayed", "c@gmail.test", {}),
        (OTHER_TEAM, "email.bounced", "d@gmail.test", bounce),
        (TEAM, "email.delivered", "e@yahoo.test", {}),
        (TEAM, "email.complained", "f@gmail.test", {}),  # not a delivery outcome
        (TEAM, "email.opened", "g@gmail.test", {}),
    ):
        add_event(batch, team, EMAIL, kind, NOW_MS, to=to, **data)
    add_event(batch, TEAM, EMAIL, "email.delivered", NOW_MS - 3 * 3_600_000, to="h@gmail.test")
    await spool.commit(batch)
    assert read_recipient_domain_counts(spool, "gmail.test", HOUR, HOUR + 1) == {
        "delivered": 2, "delivery_delayed": 1, "bounced": 1, "bounced_permanent": 1,
    }  # fmt: skip
    assert read_recipient_domain_counts(spool, "GMAIL.test", HOUR - 3, HOUR + 1)["delivered"] == 3
    assert read_recipient_domain_counts(spool, "yahoo.test", HOUR, HOUR + 1) == {"delivered": 1}
    assert read_recipient_domain_counts(spool, "none.test", HOUR - 100, HOUR + 1) == {}


async def test_a_team_counts_a_bounded_number_of_tags(
    spool: Spool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metric_counters, "MAX_COUNTED_TAGS", 3)
    batch = _core.WriteBatch()
    first = admit_tags(batch, spool, TEAM, [{"name": "n", "value": str(i)} for i in range(2)])
    again = admit_tags(batch, spool, TEAM, [{"name": "n", "value": "1"}])
    assert first == ("n:0", "n:1") and again == ("n:1",)
    await spool.commit(batch)
    batch = _core.WriteBatch()
    later = admit_tags(batch, spool, TEAM, [{"name": "n", "value": str(i)} for i in range(6)])
    assert later == ("n:0", "n:1", "n:2", OTHER_TAG)
    await spool.commit(batch)
    # Another team has its own places.
    assert admit_tags(_core.WriteBatch(), spool, OTHER_TEAM, [{"name": "n", "value": "9"}]) == (
        "n:9",
    )
    # Events recorded from the email (opens, reports) count under the same labels.
    assert counted_tags(
        spool, TEAM, [{"name": "n", "value": "2"}, {"name": "n", "value": "5"}]
    ) == (
        "n:2",
        OTHER_TAG,
    )
    assert list_counted_tags(spool, TEAM) == ["n:0", "n:1", "n:2"]
    assert tags_at_bound(spool, TEAM) and not tags_at_bound(spool, OTHER_TEAM)


def test_tag_labels_keep_a_key_one_path() -> None:
    assert tag_label("kind", "welcome") == "kind:welcome"
    assert tag_label("a/b", "c d") == "a%2Fb:c%20d"
    assert tag_label("flag", None) == "flag:"


async def test_counting_off_adds_nothing(spool: Spool) -> None:
    counters.set_event_counting(False)
    batch = _core.WriteBatch()
    assert admit_tags(batch, spool, TEAM, [{"name": "kind", "value": "x"}]) == ()
    add_event(batch, TEAM, EMAIL, "email.delivered", NOW_MS, domain_id=DOMAIN, to="a@x.test")
    add_count(batch, TEAM, DOMAIN, "suppressed", NOW_MS)
    count_first_engagement(batch, spool, TEAM, DOMAIN, EMAIL, "clicked", NOW_MS)
    await spool.commit(batch)
    assert counts(spool, TEAM, Scope()) == {}
    assert read_recipient_domain_counts(spool, "x.test", HOUR, HOUR + 1) == {}


async def test_an_unsubscribe_counts_for_the_team_and_the_broadcast(spool: Spool) -> None:
    batch = _core.WriteBatch()
    # The contact's email is no longer kept: its domain and tags are unknown.
    count_unsubscribed(batch, spool, TEAM, BROADCAST, "contact-1", NOW_MS)
    await spool.commit(batch)
    assert counts(spool, TEAM, Scope()) == {"unsubscribed": 1}
    assert counts(spool, TEAM, Scope("broadcast", BROADCAST)) == {"unsubscribed": 1}
