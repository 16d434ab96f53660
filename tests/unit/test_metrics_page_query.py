"""The Metrics page's form read from its URL: presets and their buckets, custom dates, and
everything wrong falling back to the default range with a message in plain words."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from werkzeug.datastructures import MultiDict

from postwire.dashboard.pages.metrics import MetricsQuery, axis_label, bucket_label, read_query

NOW = datetime(2026, 11, 25, 10, 30, tzinfo=UTC)


def query(**args: str) -> MetricsQuery:
    return read_query(MultiDict(args), NOW)


def test_the_default_is_the_last_7_days_per_day() -> None:
    q = query()
    assert (q.preset, q.granularity, q.error, q.domain_id) == ("7d", "day", None, None)
    assert (q.span.start, q.span.stop) == (
        datetime(2026, 11, 19, tzinfo=UTC),
        datetime(2026, 11, 26, tzinfo=UTC),
    )
    assert (q.first_day, q.last_day) == (date(2026, 11, 19), date(2026, 11, 25))


def test_presets_and_granularity() -> None:
    q = query(range="24h")
    assert q.granularity == "hour" and len(q.span.buckets()) == 24
    assert q.span.stop == datetime(2026, 11, 25, 11, tzinfo=UTC)  # the current hour the last
    assert len(query(range="30d").span.buckets()) == 30
    assert len(query(range="7d", granularity="hour").span.buckets()) == 168
    assert query(range="24h", granularity="minute").granularity == "hour"  # ignored
    assert query(domain="abc").domain_id == "abc"


def test_custom_dates() -> None:
    q = query(range="custom", **{"from": "2026-10-01", "to": "2026-10-31"})
    assert q.error is None and q.preset == "custom" and len(q.span.buckets()) == 31
    assert (q.first_day, q.last_day) == (date(2026, 10, 1), date(2026, 10, 31))
    hourly = query(range="custom", granularity="hour", **{"from": "2026-10-01", "to": "2026-10-01"})
    assert len(hourly.span.buckets()) == 24


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"range": "custom", "from": "2026-10-31", "to": "2026-10-01"}, "ends before it starts"),
        ({"range": "custom", "from": "31/10/2026"}, "YYYY-MM-DD"),
        ({"range": "custom", "from": "1990-01-01", "granularity": "hour"}, "too long"),
        ({"range": "1y"}, "Choose a range"),
    ],
)
def test_wrong_input_falls_back_to_the_default_range(args: dict[str, str], error: str) -> None:
    q = query(**args)
    assert q.error is not None and error in q.error
    assert len(q.span.buckets()) in (7, 168)


def test_labels() -> None:
    midnight, ten = datetime(2026, 11, 25, tzinfo=UTC), datetime(2026, 11, 25, 10, tzinfo=UTC)
    assert bucket_label(ten, "hour") == "25 Nov 10:00" and bucket_label(ten, "day") == "25 Nov 2026"
    assert axis_label(ten, "hour") == "10:00" and axis_label(midnight, "hour") == "25 Nov"
