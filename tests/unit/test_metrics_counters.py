"""The metrics' counters over a real spool: which counters an event adds to, the key layout
(time-ordered, one prefix per team and per domain), reading a range of buckets back, and the
rates computed from the totals."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from postwire import _core
from postwire.metrics.counters import TEAM as ALL
from postwire.metrics.counters import Scope, counter_keys, event_counter_names, hour_of
from postwire.metrics.views import (
    covering_range,
    dates_range,
    metrics_report,
    period_counts,
    preset_range,
    rates,
)
from postwire.store.deliveries import add_event
from postwire.store.metric_counters import add_count, count_first_engagement, read_counts
from postwire.store.spool import Spool

TEAM = "0190a000-0000-7000-8000-000000000001"
OTHER_TEAM = "0190a000-0000-7000-8000-000000000002"
DOMAIN = "0190a000-0000-7000-8000-0000000000d1"
OTHER_DOMAIN = "0190a000-0000-7000-8000-0000000000d2"
EMAIL = "0190a000-0000-7000-8000-0000000000e1"
# 2026-11-25 10:30 UTC
NOW = datetime(2026, 11, 25, 10, 30, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR_MS = 3_600_000
BY_DOMAIN = Scope("domain", DOMAIN)


@pytest.mark.parametrize(
    ("kind", "data", "names"),
    [
        ("email.sent", {}, ("sent",)),
        ("email.delivered", {"to": "a@x.test"}, ("delivered",)),
        ("email.delivery_delayed", {}, ("delivery_delayed",)),
        ("email.bounced", {"bounce": {"type": "Permanent"}}, ("bounced", "bounced_permanent")),
        ("email.bounced", {"bounce": {"type": "Transient"}}, ("bounced", "bounced_transient")),
        ("email.bounced", {"bounce": {"type": "odd"}}, ("bounced", "bounced_undetermined")),
        ("email.bounced", {}, ("bounced", "bounced_undetermined")),
        ("email.complained", {}, ("complained",)),
        ("email.opened", {}, ("opened",)),
        ("email.clicked", {"link": "https://x.test"}, ("clicked",)),
        ("contact.created", {}, ()),
        ("email.received", {}, ()),
    ],
)
def test_counters_of_an_event(kind: str, data: dict[str, object], names: tuple[str, ...]) -> None:
    assert event_counter_names(kind, data) == names


def test_keys_are_time_ordered_under_one_prefix_per_team_and_domain() -> None:
    hour = hour_of(NOW_MS)
    assert counter_keys(TEAM, DOMAIN, NOW_MS, "sent") == (
        f"metrics/{TEAM}/h/{hour:07d}/sent".encode(),
        f"metrics/{TEAM}/d/{hour // 24:06d}/sent".encode(),
        f"metrics/{TEAM}/domain/{DOMAIN}/h/{hour:07d}/sent".encode(),
        f"metrics/{TEAM}/domain/{DOMAIN}/d/{hour // 24:06d}/sent".encode(),
    )
    assert (
        counter_keys(TEAM, None, NOW_MS, "sent") == counter_keys(TEAM, DOMAIN, NOW_MS, "sent")[:2]
    )
    # Fixed width: the key of a later hour sorts after, whatever the digits.
    early, late = (
        counter_keys(TEAM, None, 9 * HOUR_MS, "x")[0],
        counter_keys(TEAM, None, 10 * HOUR_MS, "x")[0],
    )
    assert early < late


Event = tuple[str, str, str | None, int, dict[str, Any]]


async def commit(spool: Spool, *events: Event) -> None:
    batch = _core.WriteBatch()
    for team, kind, domain, now_ms, data in events:
        add_event(batch, team, EMAIL, kind, now_ms, domain_id=domain, **data)
    await spool.commit(batch)


async def test_events_count_per_team_domain_hour_and_day(spool: Spool) -> None:
    bounce: dict[str, Any] = {"to": "b@x.test", "bounce": {"type": "Permanent"}}
    await commit(
        spool,
        (TEAM, "email.sent", DOMAIN, NOW_MS, {}),
        (TEAM, "email.delivered", DOMAIN, NOW_MS + 1000, {"to": "a@x.test"}),
        (TEAM, "email.bounced", DOMAIN, NOW_MS - HOUR_MS, bounce),
        (TEAM, "email.sent", OTHER_DOMAIN, NOW_MS, {}),
        (TEAM, "email.sent", None, NOW_MS, {}),  # spooled before domains were counted
        (OTHER_TEAM, "email.sent", DOMAIN, NOW_MS, {}),
        (TEAM, "contact.created", None, NOW_MS, {}),
    )
    hour = hour_of(NOW_MS)
    team_hours = read_counts(spool, TEAM, ALL, "hour", hour - 5, hour + 1)
    assert team_hours == {
        hour - 1: {"bounced": 1, "bounced_permanent": 1},
        hour: {"sent": 3, "delivered": 1},
    }
    assert read_counts(spool, TEAM, BY_DOMAIN, "hour", hour - 5, hour + 1) == {
        hour - 1: {"bounced": 1, "bounced_permanent": 1},
        hour: {"sent": 1, "delivered": 1},
    }
    # The range's end is excluded, its start included.
    assert read_counts(spool, TEAM, ALL, "hour", hour, hour + 1) == {hour: team_hours[hour]}
    assert read_counts(spool, TEAM, ALL, "hour", hour - 1, hour) == {hour - 1: team_hours[hour - 1]}
    day = hour // 24
    assert read_counts(spool, TEAM, ALL, "day", day, day + 1) == {
        day: {"sent": 3, "delivered": 1, "bounced": 1, "bounced_permanent": 1}
    }
    assert read_counts(spool, OTHER_TEAM, ALL, "day", day, day + 1) == {day: {"sent": 1}}


async def test_a_long_range_reads_in_chunks(spool: Spool) -> None:
    batch = _core.WriteBatch()
    start = NOW_MS - 400 * HOUR_MS
    for h in range(400):
        for name in ("sent", "delivered", "opened", "clicked", "bounced", "complained"):
            add_count(batch, TEAM, DOMAIN, name, start + h * HOUR_MS)
    await spool.commit(batch)
    first = hour_of(start)
    counts = read_counts(spool, TEAM, BY_DOMAIN, "hour", first, first + 400)
    assert len(counts) == 400
    assert all(len(row) == 6 for row in counts.values())


async def test_unique_engagement_counts_the_first_of_each_email(spool: Spool) -> None:
    for _ in range(3):
        batch = _core.WriteBatch()
        add_event(batch, TEAM, EMAIL, "email.opened", NOW_MS, domain_id=DOMAIN)
        count_first_engagement(batch, spool, TEAM, DOMAIN, EMAIL, "opened", NOW_MS)
        await spool.commit(batch)
    hour = hour_of(NOW_MS)
    assert read_counts(spool, TEAM, BY_DOMAIN, "hour", hour, hour + 1) == {
        hour: {"opened": 3, "unique_opened": 1}
    }


async def test_report_fills_empty_buckets_and_sums_totals(spool: Spool) -> None:
    await commit(
        spool,
        (TEAM, "email.sent", DOMAIN, NOW_MS - 2 * HOUR_MS, {}),
        (TEAM, "email.delivered", DOMAIN, NOW_MS, {}),
        (TEAM, "email.delivered", DOMAIN, NOW_MS, {}),
        (TEAM, "email.delivered", DOMAIN, NOW_MS, {}),
        (TEAM, "email.bounced", DOMAIN, NOW_MS, {}),
    )
    report = await metrics_report(spool, TEAM, ALL, preset_range("24h", NOW, None))
    assert len(report.series) == 24  # the current hour the last
    assert report.series[0][0] == datetime(2026, 11, 24, 11, tzinfo=UTC)
    assert report.series[-1][0] == datetime(2026, 11, 25, 10, tzinfo=UTC)
    assert report.series[-1][1]["delivered"] == 3
    assert report.totals["sent"] == 1 and report.totals["delivered"] == 3
    assert report.rates["bounce_rate"] == 25.0 and report.rates["delivery_rate"] == 75.0
    by_day = await metrics_report(spool, TEAM, BY_DOMAIN, preset_range("7d", NOW, None))
    assert [moment.day for moment, _ in by_day.series] == [19, 20, 21, 22, 23, 24, 25]
    assert by_day.totals == report.totals


def test_ranges() -> None:
    span = dates_range(date(2026, 11, 1), date(2026, 11, 30), "day")
    assert (span.start, span.stop) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert len(span.buckets()) == 30
    assert len(dates_range(date(2026, 11, 1), date(2026, 11, 1), "hour").buckets()) == 24
    with pytest.raises(ValueError, match="after its start"):
        covering_range(NOW, NOW, "hour")
    with pytest.raises(ValueError, match="too long"):
        dates_range(date(2020, 1, 1), date(2026, 1, 1), "hour")


def test_rates() -> None:
    assert rates({}) == dict.fromkeys(
        (
            "delivery_rate",
            "bounce_rate",
            "complaint_rate",
            "open_rate",
            "click_rate",
            "unsubscribe_rate",
        ),
        0.0,
    )
    totals = {
        "delivered": 3,
        "bounced": 1,
        "complained": 1,
        "unique_opened": 2,
        "unique_clicked": 1,
        "unsubscribed": 1,
    }
    assert rates(totals) == {
        "delivery_rate": 75.0,
        "bounce_rate": 25.0,
        "complaint_rate": 33.33,
        "open_rate": 66.67,
        "click_rate": 33.33,
        "unsubscribe_rate": 33.33,
    }


async def test_period_counts_by_local_day_and_by_utc_day(spool: Spool) -> None:
    batch = _core.WriteBatch()
    # 2026-07-01 02:00 UTC is still June 30 in New York; 15:00 UTC is July 1 there too.
    for moment in (datetime(2026, 7, 1, 2, tzinfo=UTC), datetime(2026, 7, 1, 15, tzinfo=UTC)):
        add_count(batch, TEAM, None, "sent", int(moment.timestamp() * 1000))
    add_count(
        batch, TEAM, None, "sent", int(datetime(2026, 7, 3, 23, tzinfo=UTC).timestamp() * 1000)
    )
    await spool.commit(batch)
    start, stop = datetime(2026, 6, 30, tzinfo=UTC), datetime(2026, 7, 5, 6, tzinfo=UTC)
    local = period_counts(spool, TEAM, ALL, start, stop, ZoneInfo("America/New_York"), "daily")
    assert {k.date().isoformat(): v for k, v in local.items()} == {
        "2026-06-30": {"sent": 1}, "2026-07-01": {"sent": 1}, "2026-07-03": {"sent": 1},
    }  # fmt: skip
    utc = period_counts(spool, TEAM, ALL, start, stop, UTC, "daily")
    assert {k.date().isoformat(): v for k, v in utc.items()} == {
        "2026-07-01": {"sent": 2}, "2026-07-03": {"sent": 1},
    }  # fmt: skip
    # A start within a day reads its remaining hours, not the whole day.
    late = period_counts(spool, TEAM, ALL, datetime(2026, 7, 1, 3, tzinfo=UTC), stop, UTC, "weekly")
    assert late == {datetime(2026, 6, 29, tzinfo=UTC): {"sent": 2}}
    monthly = period_counts(spool, TEAM, ALL, start, stop, UTC, "monthly")
    assert monthly == {datetime(2026, 7, 1, tzinfo=UTC): {"sent": 3}}
