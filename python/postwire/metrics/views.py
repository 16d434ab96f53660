"""The metrics as pages and the API show them: a range of UTC hours or days, its totals and
rates, and one row of counts per bucket, read from the counters kept with events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Final, Literal

from postwire.metrics.counters import (
    COUNTS,
    DAY_MS,
    HOUR_MS,
    Granularity,
    Scope,
    event_counter_names,
)
from postwire.store.deliveries import EventRecord
from postwire.store.metric_counters import read_counts, read_counts_parked
from postwire.store.spool import Spool

RATES: Final = (
    "delivery_rate",
    "bounce_rate",
    "complaint_rate",
    "open_rate",
    "click_rate",
    "unsubscribe_rate",
)
# The range presets of the page: (name, label, length, default granularity).
PRESETS: Final[dict[str, tuple[str, timedelta, Granularity]]] = {
    "24h": ("Last 24 hours", timedelta(hours=24), "hour"),
    "7d": ("Last 7 days", timedelta(days=7), "day"),
    "30d": ("Last 30 days", timedelta(days=30), "day"),
}
# More buckets than this in one range is refused (a page or response that size helps nobody).
MAX_BUCKETS: Final = 10_000


@dataclass(frozen=True, slots=True)
class MetricsRange:
    """Buckets `first` <= b < `end` of `granularity` (hours or days since the Unix epoch)."""

    granularity: Granularity
    first: int
    end: int

    @property
    def bucket_ms(self) -> int:
        return HOUR_MS if self.granularity == "hour" else DAY_MS

    @property
    def start(self) -> datetime:
        return _moment(self.first * self.bucket_ms)

    @property
    def stop(self) -> datetime:
        return _moment(self.end * self.bucket_ms)

    def buckets(self) -> range:
        return range(self.first, self.end)

    def bucket_start(self, bucket: int) -> datetime:
        return _moment(bucket * self.bucket_ms)


@dataclass(frozen=True, slots=True)
class MetricsReport:
    range: MetricsRange
    totals: dict[str, int]
    rates: dict[str, float]
    # One (bucket start, counts) per bucket of the range, empty ones included, oldest first.
    series: list[tuple[datetime, dict[str, int]]] = field(default_factory=list)


def covering_range(start: datetime, stop: datetime, granularity: Granularity) -> MetricsRange:
    """The buckets that cover [start, stop): whole UTC hours or days, so that totals are the
    sum of the buckets shown. Raises ValueError for an empty or too long range."""
    size = HOUR_MS if granularity == "hour" else DAY_MS
    start_ms, stop_ms = _ms(start), _ms(stop)
    if stop_ms <= start_ms:
        raise ValueError("The end of the range must be after its start.")
    first, end = start_ms // size, -(-stop_ms // size)
    if end - first > MAX_BUCKETS:
        unit = "hours" if granularity == "hour" else "days"
        raise ValueError(f"The range is too long: at most {MAX_BUCKETS:,} {unit}.")
    return MetricsRange(granularity, first, end)


def preset_range(preset: str, now: datetime, granularity: Granularity | None) -> MetricsRange:
    """The range of a preset ("24h", "7d", "30d"): as many whole buckets as it is long, the
    current one (up to now) the last; unknown presets raise KeyError."""
    _, length, default = PRESETS[preset]
    granularity = granularity or default
    size = HOUR_MS if granularity == "hour" else DAY_MS
    end = _ms(now) // size + 1
    return MetricsRange(granularity, end - max(1, _ms_of(length) // size), end)


def dates_range(first: date, last: date, granularity: Granularity) -> MetricsRange:
    """The UTC days `first` to `last`, both included."""
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    stop = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)
    return covering_range(start, stop, granularity)


def rates(totals: dict[str, int]) -> dict[str, float]:
    """Percentages rounded to two decimals; a zero denominator gives 0. Delivery and bounce
    rates are shares of the recipients whose delivery ended (delivered or bounced), so an
    email to several people counts each; complaints, opens, clicks and unsubscribes are shares
    of the delivered ones (opens and clicks counted once per email)."""
    delivered, bounced = totals.get("delivered", 0), totals.get("bounced", 0)
    ended = delivered + bounced
    return {
        "delivery_rate": _percent(delivered, ended),
        "bounce_rate": _percent(bounced, ended),
        "complaint_rate": _percent(totals.get("complained", 0), delivered),
        "open_rate": _percent(totals.get("unique_opened", 0), delivered),
        "click_rate": _percent(totals.get("unique_clicked", 0), delivered),
        "unsubscribe_rate": _percent(totals.get("unsubscribed", 0), delivered),
    }


async def metrics_report(
    spool: Spool, team_id: str, scope: Scope, span: MetricsRange
) -> MetricsReport:
    """Totals, rates and the per-bucket series of the team's counts in `scope` (read parked,
    not blocking on a table store on the network)."""
    counts = await read_counts_parked(spool, team_id, scope, span.granularity, span.first, span.end)
    totals = dict.fromkeys(COUNTS, 0)
    series = []
    for bucket in span.buckets():
        row = dict.fromkeys(COUNTS, 0)
        for name, value in counts.get(bucket, {}).items():
            if name in row:
                row[name] = value
                totals[name] += value
        series.append((span.bucket_start(bucket), row))
    return MetricsReport(span, totals, rates(totals), series)


# Periods of the REST API's `granularity`: bucketed in a time zone, from the hour counters (or,
# in UTC, the day ones: a long range stays a short scan).
Period = Literal["hourly", "daily", "weekly", "monthly"]


def period_start(moment: datetime, period: Period) -> datetime:
    """The start of the period holding `moment` (aware, in its own zone); weeks from Monday."""
    if period == "hourly":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "weekly":
        return day - timedelta(days=day.weekday())
    if period == "monthly":
        return day.replace(day=1)
    return day


def period_counts(
    spool: Spool,
    team_id: str,
    scope: Scope,
    start: datetime,
    stop: datetime,
    zone: tzinfo,
    period: Period,
) -> dict[datetime, dict[str, int]]:
    """Period start (in `zone`) -> counter name -> count, over the hours (or, in `datetime.UTC`,
    the days) that begin in [start, stop); periods without counts are left out. Counts are
    kept per UTC hour, so a zone whose offset is not whole hours has its periods' boundaries
    rounded to them."""
    grouped: dict[datetime, dict[str, int]] = {}
    for bucket_ms, row in _bucket_counts(spool, team_id, scope, start, stop, period, zone):
        local = _moment(bucket_ms).astimezone(zone)
        total = grouped.setdefault(period_start(local, period), {})
        for name, value in row.items():
            total[name] = total.get(name, 0) + value
    return grouped


def event_period_counts(
    events: Iterable[EventRecord], start: datetime, stop: datetime, zone: tzinfo, period: Period
) -> dict[datetime, dict[str, int]]:
    """Like `period_counts`, from one email's own events (oldest first) rather than the
    counters: the hours that begin in [start, stop), the first open and click of the email
    its unique ones. Counters kept without an event (suppressed, unsubscribed, failed) are
    not among them."""
    first_hour, end_hour = -(-_ms(start) // HOUR_MS), -(-_ms(stop) // HOUR_MS)
    grouped: dict[datetime, dict[str, int]] = {}
    engaged: set[str] = set()
    for event in events:
        names = list(event_counter_names(event.type, event.data))
        if names and names[0] in ("opened", "clicked") and names[0] not in engaged:
            engaged.add(names[0])
            names.append(f"unique_{names[0]}")
        if not names or not first_hour <= event.created_at_ms // HOUR_MS < end_hour:
            continue
        hour_start = _moment(event.created_at_ms // HOUR_MS * HOUR_MS).astimezone(zone)
        total = grouped.setdefault(period_start(hour_start, period), {})
        for name in names:
            total[name] = total.get(name, 0) + 1
    return grouped


def _bucket_counts(
    spool: Spool,
    team_id: str,
    scope: Scope,
    start: datetime,
    stop: datetime,
    period: Period,
    zone: tzinfo,
) -> list[tuple[int, dict[str, int]]]:
    """(bucket start ms, counts) of the hours that begin in [start, stop); in UTC, periods of
    days or more read the whole days among them from the day counters (a long range stays a
    short scan) and only the ragged ends hour by hour."""
    first_hour, end_hour = -(-_ms(start) // HOUR_MS), -(-_ms(stop) // HOUR_MS)
    spans: list[tuple[Granularity, int, int]] = [("hour", first_hour, end_hour)]
    if period != "hourly" and zone is UTC:
        first_day, end_day = -(-first_hour // 24), end_hour // 24
        if first_day < end_day:
            spans = [
                ("hour", first_hour, first_day * 24),
                ("day", first_day, end_day),
                ("hour", end_day * 24, end_hour),
            ]
    found: list[tuple[int, dict[str, int]]] = []
    for granularity, first, end in spans:
        size = HOUR_MS if granularity == "hour" else DAY_MS
        if first < end:
            counts = read_counts(spool, team_id, scope, granularity, first, end)
            found.extend((bucket * size, row) for bucket, row in sorted(counts.items()))
    return found


def _percent(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else round(100 * part / whole, 2)


def _ms_of(length: timedelta) -> int:
    return int(length.total_seconds() * 1000)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
