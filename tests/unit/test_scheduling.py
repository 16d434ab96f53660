"""`parse_scheduled_at`: ISO 8601 and natural language against a fixed `now`, DST edges included."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from postwire.api.scheduling import (
    INVALID_FORMAT_MESSAGE,
    NOT_IN_FUTURE_MESSAGE,
    TOO_FAR_MESSAGE,
    parse_scheduled_at,
)
from postwire.errors import ApiError

# Friday 2026-03-06 15:00 UTC (10:00 in New York, EST; 16:00 in Paris, CET).
NOW = datetime(2026, 3, 6, 15, 0, tzinfo=UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # ISO 8601
        ("2026-03-07T10:00:00Z", utc(2026, 3, 7, 10)),
        ("2026-03-07T10:00:00.858Z", utc(2026, 3, 7, 10, 0, 0, 858000)),
        ("2026-03-07T10:00:00-0700", utc(2026, 3, 7, 17)),
        ("2026-03-07T10:00:00+05:30", utc(2026, 3, 7, 4, 30)),
        ("2026-03-07T10:00:00", utc(2026, 3, 7, 10)),  # naive: UTC
        ("2026-03-07 10:00", utc(2026, 3, 7, 10)),
        ("2026-03-07", utc(2026, 3, 7)),
        ("  2026-03-07T10:00:00Z  ", utc(2026, 3, 7, 10)),
        # relative: exact durations
        ("in 1 min", NOW + timedelta(minutes=1)),
        ("in 1 minute", NOW + timedelta(minutes=1)),
        ("in 2 hours", NOW + timedelta(hours=2)),
        ("in 1 hour", NOW + timedelta(hours=1)),
        ("in an hour", NOW + timedelta(hours=1)),
        ("in 3 days", NOW + timedelta(days=3)),  # across the US DST change: still 72 h
        ("in 2 weeks", NOW + timedelta(weeks=2)),
        ("in 90 seconds", NOW + timedelta(seconds=90)),
        ("in 1h30m", NOW + timedelta(hours=1, minutes=30)),
        ("in 1 hour and 30 minutes", NOW + timedelta(hours=1, minutes=30)),
        ("IN 5 MINS", NOW + timedelta(minutes=5)),
        ("45 minutes from now", NOW + timedelta(minutes=45)),
        ("in 30 days", NOW + timedelta(days=30)),
        # wall times, UTC unless a zone is given
        ("tomorrow at 9am", utc(2026, 3, 7, 9)),
        ("tomorrow at 9 a.m.", utc(2026, 3, 7, 9)),
        ("tomorrow 9am", utc(2026, 3, 7, 9)),
        ("9am tomorrow", utc(2026, 3, 7, 9)),
        ("tomorrow at 12am", utc(2026, 3, 7, 0)),
        ("tomorrow at noon", utc(2026, 3, 7, 12)),
        ("tomorrow", utc(2026, 3, 7, 15)),  # no time: the current time of day
        ("today at 17:30", utc(2026, 3, 6, 17, 30)),
        ("today at 5:30pm", utc(2026, 3, 6, 17, 30)),
        ("at 5pm", utc(2026, 3, 6, 17)),  # still ahead today
        ("at 2pm", utc(2026, 3, 7, 14)),  # passed today: tomorrow
        ("at 17:00", utc(2026, 3, 6, 17)),
        ("Friday at 3pm ET", utc(2026, 3, 6, 20)),  # today, 15:00 EST
        ("Friday at 3pm, ET", utc(2026, 3, 6, 20)),
        ("friday at 4pm", utc(2026, 3, 6, 16)),  # today, still ahead
        ("Friday at 2pm", utc(2026, 3, 13, 14)),  # passed today: next week
        ("this friday at 4pm", utc(2026, 3, 6, 16)),
        ("next friday at 4pm", utc(2026, 3, 13, 16)),  # `next`: never today
        ("next monday 10:00", utc(2026, 3, 9, 10)),
        ("monday", utc(2026, 3, 9, 15)),
        ("on mon at 8am", utc(2026, 3, 9, 8)),
        ("Saturday at 3pm PT", utc(2026, 3, 7, 23)),
        ("tomorrow at 9am CET", utc(2026, 3, 7, 8)),
        ("tomorrow at 9am GMT", utc(2026, 3, 7, 9)),
        ("tomorrow at 9am BST", utc(2026, 3, 7, 8)),  # fixed +01:00
        ("tomorrow 9am Europe/Paris", utc(2026, 3, 7, 8)),
        ("tomorrow 9am europe/paris", utc(2026, 3, 7, 8)),
        ("tomorrow at 9am Asia/Kolkata", utc(2026, 3, 7, 3, 30)),
        ("tomorrow at 9am UTC+2", utc(2026, 3, 7, 7)),
        ("tomorrow at 9am GMT-05:30", utc(2026, 3, 7, 14, 30)),
    ],
)
def test_valid_values(value: str, expected: datetime) -> None:
    result = parse_scheduled_at(value, NOW)
    assert result == expected
    assert result.tzinfo is UTC


@pytest.mark.parametrize(
    ("now", "value", "expected"),
    [
        # US spring forward, Sunday 2026-03-08 02:00 EST -> 03:00 EDT.
        (NOW, "sunday at 1:30am ET", utc(2026, 3, 8, 6, 30)),  # EST
        (NOW, "sunday at 3:30am ET", utc(2026, 3, 8, 7, 30)),  # EDT
        # 02:30 does not exist: read with the offset before the change (EST), 03:30 EDT.
        (NOW, "sunday at 2:30am America/New_York", utc(2026, 3, 8, 7, 30)),
        # "tomorrow" keeps the wall time: Saturday 10:00 EST -> Sunday 10:00 EDT is 23 hours.
        (utc(2026, 3, 7, 15), "tomorrow ET", utc(2026, 3, 8, 14)),
        # Europe's change, Sunday 2026-03-29 02:00 CET -> 03:00 CEST.
        (utc(2026, 3, 27, 12), "tomorrow at 9am Europe/Paris", utc(2026, 3, 28, 8)),
        (utc(2026, 3, 27, 12), "sunday at 9am Europe/Paris", utc(2026, 3, 29, 7)),
        # US fall back, Sunday 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice, first wins.
        (utc(2026, 10, 30, 12), "sunday at 1:30am ET", utc(2026, 11, 1, 5, 30)),
        (utc(2026, 10, 30, 12), "sunday at 3am ET", utc(2026, 11, 1, 8)),
        # ET follows DST; EST is the fixed -05:00 even in summer.
        (utc(2026, 7, 3, 12), "Friday at 3pm ET", utc(2026, 7, 3, 19)),
        (utc(2026, 7, 3, 12), "Friday at 3pm EDT", utc(2026, 7, 3, 19)),
        (utc(2026, 7, 3, 12), "Friday at 3pm EST", utc(2026, 7, 3, 20)),
        # A `now` given in another zone is the same instant.
        (NOW.astimezone(timezone(timedelta(hours=-5))), "in 1 hour", utc(2026, 3, 6, 16)),
    ],
)
def test_time_zones_and_dst_edges(now: datetime, value: str, expected: datetime) -> None:
    assert parse_scheduled_at(value, now) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", INVALID_FORMAT_MESSAGE),
        ("soon", INVALID_FORMAT_MESSAGE),
        ("yesterday", INVALID_FORMAT_MESSAGE),
        ("in", INVALID_FORMAT_MESSAGE),
        ("in 5", INVALID_FORMAT_MESSAGE),
        ("in 5 monkeys", INVALID_FORMAT_MESSAGE),
        ("in 1 hour ET", INVALID_FORMAT_MESSAGE),
        ("at 25:00", INVALID_FORMAT_MESSAGE),
        ("at 13pm", INVALID_FORMAT_MESSAGE),
        ("at 0am", INVALID_FORMAT_MESSAGE),
        ("at 9:60", INVALID_FORMAT_MESSAGE),
        ("tomorrow at 9am Mars/Olympus", INVALID_FORMAT_MESSAGE),
        ("tomorrow at 9am ../../etc/passwd", INVALID_FORMAT_MESSAGE),
        ("friday at 3pm ET please", INVALID_FORMAT_MESSAGE),
        ("2026-13-01T00:00:00Z", INVALID_FORMAT_MESSAGE),
        ("2026-03-07X10:00", INVALID_FORMAT_MESSAGE),
        ("in 0 minutes", NOT_IN_FUTURE_MESSAGE),
        ("today at 9am", NOT_IN_FUTURE_MESSAGE),
        ("2026-03-06T15:00:00Z", NOT_IN_FUTURE_MESSAGE),  # exactly now
        ("2020-01-01T00:00:00Z", NOT_IN_FUTURE_MESSAGE),
        ("0001-01-01T00:00:00+05:00", NOT_IN_FUTURE_MESSAGE),
        ("in 31 days", TOO_FAR_MESSAGE),
        ("in 30 days and 1 second", TOO_FAR_MESSAGE),
        ("in 5 weeks", TOO_FAR_MESSAGE),
        ("in 99999999999999999999 weeks", TOO_FAR_MESSAGE),
        ("2026-04-05T15:00:01Z", TOO_FAR_MESSAGE),
        ("9999-12-31T23:59:59-05:00", TOO_FAR_MESSAGE),
    ],
)
def test_refused_values(value: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_scheduled_at(value, NOW)
    assert (caught.value.status, caught.value.name) == (422, "validation_error")
    assert caught.value.message == message


def test_exactly_thirty_days_ahead_is_accepted() -> None:
    assert parse_scheduled_at("2026-04-05T15:00:00Z", NOW) == NOW + timedelta(days=30)


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_scheduled_at("in 1 hour", datetime(2026, 3, 6, 15))
