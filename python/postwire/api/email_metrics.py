"""`GET /emails/metrics`: the team's email metrics over a date range, read from the counters
kept as events happen (`postwire.metrics`), as totals and optionally by period and by one of
domain, broadcast and tag.

The counters are kept per sending domain, per broadcast and per tag (not per combination of
them), so a request breaks down or filters by one of those at most; `email_id` (and the
`email` breakdown) counts the emails' own events. `received` is accepted and is 0: Postwire
receives no mail for teams.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Final, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from quart import Blueprint, request
from werkzeug.datastructures import MultiDict

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.metrics_models import MetricsBody
from postwire.domains.store import list_domains
from postwire.errors import validation_error
from postwire.metrics.counters import COUNTS, OTHER_TAG, TEAM, Scope, tag_label
from postwire.metrics.views import (
    RATES,
    Period,
    event_period_counts,
    period_counts,
    period_start,
    rates,
)
from postwire.store.broadcasts import BROADCASTS, broadcasts_prefix, get_broadcast
from postwire.store.email_details import email_events
from postwire.store.emails import EMAILS, email_key
from postwire.store.metric_counters import list_counted_tags
from postwire.store.spool import Spool

UNCOUNTED: Final = ("received",)
METRICS: Final = (*COUNTS, *UNCOUNTED, *RATES)
# Breakdowns besides `period`: each is a dimension the counters are kept by.
BREAKDOWNS: Final = ("domain", "broadcast", "tag", "email")
DIMENSIONS: Final = ("period", *BREAKDOWNS)
PERIODS: Final = ("hourly", "daily", "weekly", "monthly")
MAX_PERIODS: Final = 10_000
MAX_FILTER_VALUES: Final = 100
# Broadcasts a `broadcast` breakdown looks at: the team's latest ones (whole records are read).
MAX_BROADCAST_ROWS: Final = 200
_UTC_NAMES: Final = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "Zulu", "Universal"})
_TAG: Final = re.compile(r"([A-Za-z0-9_-]{1,256}):([A-Za-z0-9_-]{0,256})")


def listed(args: MultiDict[str, str], name: str) -> list[str]:
    """A list parameter: comma-separated (as the SDKs send it) or repeated."""
    return [
        item.strip() for value in args.getlist(name) for item in value.split(",") if item.strip()
    ]


def parse_zone(name: str | None) -> tzinfo:
    if not name or name in _UTC_NAMES:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise validation_error(
            f"`timezone` must be an IANA time zone such as UTC, got {name!r}."
        ) from None


def parse_moment(text: str, field: str, zone: tzinfo) -> datetime:
    """An ISO 8601 date (midnight in `zone`) or datetime (naive ones in `zone`)."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=zone)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise validation_error(
            f"`{field}` must be an ISO 8601 date (2026-07-01) or datetime (2026-07-01T00:00:00Z)."
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def periods(start: datetime, stop: datetime, period: Period, zone: tzinfo) -> Iterator[datetime]:
    """The starts (in `zone`) of the periods that overlap [start, stop), in order."""
    current = period_start(start.astimezone(zone), period)
    while current < stop:
        yield current
        if period == "hourly":  # in UTC: a wall-clock hour may repeat or vanish
            current = (current.astimezone(UTC) + timedelta(hours=1)).astimezone(zone)
        elif period == "monthly":
            month = current.month % 12 + 1
            current = current.replace(year=current.year + (current.month == 12), month=month)
        else:
            step = timedelta(days=7 if period == "weekly" else 1)
            current = period_start((current + step).replace(hour=12), period)


def period_label(moment: datetime, period: Period) -> str:
    if period == "hourly":
        return iso(moment)
    return moment.date().isoformat()


def iso(moment: datetime) -> str:
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def metric_values(counts: dict[str, int], names: list[str]) -> dict[str, int | float]:
    computed = rates(counts) if any(name in RATES for name in names) else {}
    return {name: computed[name] if name in RATES else counts.get(name, 0) for name in names}


@dataclass(frozen=True, slots=True)
class Query:
    """What a request asks for, checked."""

    names: list[str]
    dimensions: list[str]
    period: Period
    zone: tzinfo
    start: datetime
    stop: datetime


# A row's scope (the team as a whole, or one domain's, broadcast's or tag's counts) with the
# fields that name it in a `data` row.
Row = tuple[Scope, dict[str, str]]


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("email_metrics", __name__)

    @blueprint.get("/emails/metrics")
    async def email_metrics() -> MetricsBody:
        team_id = current_caller().team_id
        query = read_query(request.args, ctx.now())
        starts = period_starts(query)
        email_ids = listed(request.args, "email_id")
        if email_ids:
            counted = _email_counts(ctx.spool, team_id, email_ids, query)
            rows = {scope: {"email_id": scope.value} for scope in counted}
        else:
            selected = selected_rows(ctx.spool, team_id, request.args, query.dimensions)
            rows = dict(selected)
            counted = {
                scope: period_counts(
                    ctx.spool, team_id, scope, query.start, query.stop, query.zone, query.period
                )
                for scope, _ in selected
            }
        if not set(BREAKDOWNS) & set(query.dimensions):  # the rows asked for, as one
            counted, rows = {TEAM: _merged(counted.values())}, {TEAM: {}}
        totals = _summed(row for by_period in counted.values() for row in by_period.values())
        body: MetricsBody = {
            "object": "metrics", "start_date": iso(query.start), "end_date": iso(query.stop),
            "metrics": query.names, "dimensions": query.dimensions, "granularity": query.period,
            "totals": metric_values(totals, query.names),
        }  # fmt: skip
        if query.dimensions:
            body["data"] = _rows(counted, rows, query, starts)
        return body

    return blueprint


def read_query(args: MultiDict[str, str], now: datetime) -> Query:
    zone = parse_zone(args.get("timezone"))
    granularity = args.get("granularity") or "daily"
    if granularity not in PERIODS:
        raise validation_error("`granularity` must be one of hourly, daily, weekly, monthly.")
    names = listed(args, "metrics") or list(METRICS)
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise validation_error(
            f"Unknown metric {unknown[0]!r}: the metrics are {', '.join(METRICS)}."
        )
    dimensions = listed(args, "dimensions")
    if any(d not in DIMENSIONS for d in dimensions):
        raise validation_error("`dimensions` may be period and one of domain, broadcast, tag "
                               "and email.")  # fmt: skip
    breakdowns = [d for d in dimensions if d in BREAKDOWNS]
    filters = [name for name in ("domain_id", "broadcast_id", "tag", "email_id") if args.get(name)]
    if len(set(breakdowns)) > 1 or len(filters) > 1:
        raise validation_error(
            "Postwire counts per domain, broadcast or tag, not per combination: break down by "
            "one of them and filter by at most one of domain_id, broadcast_id, tag and email_id."
        )
    if "email" in breakdowns and not filters:
        raise validation_error(
            "An `email` breakdown needs `email_id`: an email's counts are read from its events."
        )
    if breakdowns and filters and filters[0] != _FILTER_OF[breakdowns[0]]:
        raise validation_error(
            f"A `{breakdowns[0]}` breakdown may be filtered by `{_FILTER_OF[breakdowns[0]]}` only."
        )
    stop = now
    if args.get("end_date"):
        stop = min(parse_moment(args["end_date"], "end_date", zone), now)
    if args.get("start_date"):
        start = parse_moment(args["start_date"], "start_date", zone)
    else:
        first_day = stop.astimezone(zone).date() - timedelta(days=6)
        start = datetime(first_day.year, first_day.month, first_day.day, tzinfo=zone)
    if start > stop:
        raise validation_error("`start_date` must be on or before `end_date`.")
    return Query(names, dimensions, cast(Period, granularity), zone, start, stop)


_FILTER_OF: Final = {
    "domain": "domain_id",
    "broadcast": "broadcast_id",
    "tag": "tag",
    "email": "email_id",
}


def period_starts(query: Query) -> list[datetime]:
    if "period" not in query.dimensions:
        return []
    starts = []
    for moment in periods(query.start, query.stop, query.period, query.zone):
        starts.append(moment)
        if len(starts) > MAX_PERIODS:
            raise validation_error(
                f"The range holds more than {MAX_PERIODS:,} {query.period} periods."
            )
    return starts


def selected_rows(
    spool: Spool, team_id: str, args: MultiDict[str, str], dimensions: list[str]
) -> list[Row]:
    """The scopes whose counts the request reads: the filter's values, or every value of the
    breakdown, or the team as a whole."""
    breakdown = next((d for d in dimensions if d in BREAKDOWNS), None)
    for kind in ("domain", "broadcast", "tag"):
        name = _FILTER_OF[kind]
        wanted = listed(args, name)
        if len(wanted) > MAX_FILTER_VALUES:
            raise validation_error(f"At most {MAX_FILTER_VALUES} `{name}` values.")
        if wanted or breakdown == kind:
            return _scopes(spool, team_id, kind, wanted or None)
    return [(TEAM, {})]


def _scopes(spool: Spool, team_id: str, kind: str, wanted: list[str] | None) -> list[Row]:
    """The rows of one dimension: those `wanted`, each checked, or (None) all the team's."""
    if kind == "domain":
        domains, _ = list_domains(spool, team_id)
        names = {domain.id: domain.name for domain in domains}
        if wanted is not None and any(domain_id not in names for domain_id in wanted):
            raise validation_error("A `domain_id` is not one of this team's domains.")
        ids = wanted if wanted is not None else sorted(names, key=names.__getitem__)
        return [(Scope("domain", i), {"domain_id": i, "domain_name": names[i]}) for i in ids]
    if kind == "broadcast":
        if wanted is None:
            rows = BROADCASTS.scan(
                spool, prefix=broadcasts_prefix(team_id), reverse=True, limit=MAX_BROADCAST_ROWS
            )
            found = [record for _, record in rows]
        else:
            found = [b for b in (get_broadcast(spool, team_id, i) for i in wanted) if b]
            if len(found) < len(wanted):
                raise validation_error("A `broadcast_id` is not one of this team's broadcasts.")
        return [
            (Scope("broadcast", b.id), {"broadcast_id": b.id, "broadcast_name": b.name})
            for b in found
        ]
    labels = [*list_counted_tags(spool, team_id), OTHER_TAG] if wanted is None else []
    for text in wanted or ():
        match = _TAG.fullmatch(text)
        if match is None and text != OTHER_TAG:
            raise validation_error(
                f"`tag` is name:value (letters, digits, _ and -) or {OTHER_TAG}, got {text!r}."
            )
        labels.append(OTHER_TAG if match is None else tag_label(match[1], match[2]))
    return [(Scope("tag", label), {"tag": label}) for label in labels]


def _email_counts(
    spool: Spool, team_id: str, email_ids: list[str], query: Query
) -> dict[Scope, dict[datetime, dict[str, int]]]:
    """The counts of each of the team's emails `email_ids`, from its own events."""
    if len(email_ids) > MAX_FILTER_VALUES:
        raise validation_error(f"At most {MAX_FILTER_VALUES} `email_id` values.")
    counted = {}
    for email_id in dict.fromkeys(email_ids):
        record = EMAILS.get(spool, email_key(team_id, email_id))
        if record is None:
            raise validation_error("An `email_id` is not one of this team's emails.")
        events = email_events(spool, record).events
        counted[Scope("email", email_id)] = event_period_counts(
            events, query.start, query.stop, query.zone, query.period
        )
    return counted


def _summed(rows: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for row in rows:
        for name, value in row.items():
            total[name] = total.get(name, 0) + value
    return total


def _merged(scopes: Iterable[dict[datetime, dict[str, int]]]) -> dict[datetime, dict[str, int]]:
    merged: dict[datetime, dict[str, int]] = {}
    for by_period in scopes:
        for moment, row in by_period.items():
            merged[moment] = _summed([merged.get(moment, {}), row])
    return merged


def _rows(
    counted: dict[Scope, dict[datetime, dict[str, int]]],
    fields: dict[Scope, dict[str, str]],
    query: Query,
    starts: list[datetime],
) -> list[dict[str, str | int | float]]:
    """The `data` rows: every period of the range (with `period`), for each domain, broadcast
    or tag that has counts (with that breakdown), in period then scope order."""
    broken_down = bool(set(BREAKDOWNS) & set(query.dimensions))
    scopes = [scope for scope, found in counted.items() if found or not broken_down]
    rows: list[dict[str, str | int | float]] = []
    for moment in starts if "period" in query.dimensions else [None]:
        for scope in scopes:
            row: dict[str, str | int | float] = {}
            if moment is not None:
                row["period"] = period_label(moment, query.period)
                counts = counted[scope].get(moment, {})
            else:
                counts = _summed(counted[scope].values())
            row |= fields[scope]
            row.update(metric_values(counts, query.names))
            rows.append(row)
    return rows
