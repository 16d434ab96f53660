"""`GET /emails/metrics`'s parameters and periods: dates and datetimes in a time zone, and the
periods of a range (hours across a DST change, weeks from Monday, months)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from werkzeug.datastructures import MultiDict

from postwire.api.email_metrics import (
    Query,
    iso,
    listed,
    parse_moment,
    parse_zone,
    period_label,
    periods,
    read_query,
)
from postwire.errors import ApiError

NEW_YORK = ZoneInfo("America/New_York")


def test_lists_are_comma_separated_or_repeated() -> None:
    args = MultiDict([("metrics", "sent, delivered"), ("metrics", "opened"), ("dimensions", "")])
    assert listed(args, "metrics") == ["sent", "delivered", "opened"]
    assert listed(args, "dimensions") == []


def test_moments_and_zones() -> None:
    assert parse_zone(None) is UTC and parse_zone("Etc/UTC") is UTC
    assert parse_moment("2026-07-01", "start_date", NEW_YORK) == datetime(
        2026, 7, 1, tzinfo=NEW_YORK
    )
    assert parse_moment("2026-07-01T10:00:00Z", "start_date", NEW_YORK) == datetime(
        2026, 7, 1, 10, tzinfo=UTC
    )
    with pytest.raises(ApiError, match="ISO 8601"):
        parse_moment("July 1st", "start_date", UTC)
    with pytest.raises(ApiError, match="IANA"):
        parse_zone("Mars/Olympus")
    assert iso(datetime(2026, 7, 1, 4, tzinfo=NEW_YORK)) == "2026-07-01T08:00:00.000Z"


def test_periods_of_a_range() -> None:
    start, stop = datetime(2026, 7, 1, tzinfo=UTC), datetime(2026, 8, 15, tzinfo=UTC)
    months = list(periods(start, stop, "monthly", UTC))
    assert [period_label(m, "monthly") for m in months] == ["2026-07-01", "2026-08-01"]
    weeks = list(periods(start, stop, "weekly", UTC))
    assert weeks[0] == datetime(2026, 6, 29, tzinfo=UTC)  # the Monday of the first week
    assert all(w.weekday() == 0 for w in weeks) and len(weeks) == 7
    assert len(list(periods(start, stop, "daily", UTC))) == 45
    # New York's clocks go back on 2026-11-01: that local day has 25 hours.
    day = datetime(2026, 11, 1, tzinfo=NEW_YORK)
    hours = list(periods(day, datetime(2026, 11, 2, tzinfo=NEW_YORK), "hourly", NEW_YORK))
    assert len(hours) == 25
    days = list(periods(day, datetime(2026, 11, 4, tzinfo=NEW_YORK), "daily", NEW_YORK))
    assert [d.isoformat() for d in days] == [
        "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", "2026-11-03T00:00:00-05:00",
    ]  # fmt: skip
    assert period_label(hours[0], "hourly") == "2026-11-01T04:00:00.000Z"


NOW = datetime(2026, 11, 25, 10, 30, tzinfo=UTC)


def query(*pairs: tuple[str, str]) -> Query:
    return read_query(MultiDict(pairs), NOW)


def test_one_dimension_of_counts_at_a_time() -> None:
    assert query(("dimensions", "period,tag"), ("tag", "kind:receipt")).dimensions == [
        "period", "tag",
    ]  # fmt: skip
    assert query(("dimensions", "email"), ("email_id", "e1")).dimensions == ["email"]
    refused = [
        (("dimensions", "domain,broadcast"),),
        (("domain_id", "d1"), ("tag", "kind:news")),
        (("broadcast_id", "b1"), ("email_id", "e1")),
    ]
    for pairs in refused:
        with pytest.raises(ApiError, match="not per combination"):
            query(*pairs)
    with pytest.raises(ApiError, match="may be filtered by `tag` only"):
        query(("dimensions", "tag"), ("domain_id", "d1"))
    with pytest.raises(ApiError, match="needs `email_id`"):
        query(
            ("dimensions", "email"),
        )
    with pytest.raises(ApiError, match="`dimensions` may be"):
        query(
            ("dimensions", "recipient"),
        )
    with pytest.raises(ApiError, match="Unknown metric 'opens'"):
        query(
            ("metrics", "sent,opens"),
        )


def test_the_default_range_and_its_checks() -> None:
    q = query()
    assert (q.start, q.stop, q.period) == (datetime(2026, 11, 19, tzinfo=UTC), NOW, "daily")
    assert query(("end_date", "2030-01-01")).stop == NOW  # capped at now
    with pytest.raises(ApiError, match="on or before"):
        query(("start_date", "2026-11-25"), ("end_date", "2026-11-24"))
