"""`GET /emails/metrics`: the team's email metrics over a date range, read from the counters
kept as events happen (`postwire.metrics`), as totals and optionally by period and by domain.

Postwire keeps counts per sending domain and per UTC hour; it breaks metrics down by `period`
and `domain`. Breakdowns and filters by email or broadcast are refused (422), as are metric
names it does not know. `received`, `failed` and `unsubscribed` are accepted and are 0: no
count is kept for them yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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
from postwire.metrics.counters import COUNTS, domain_scope
from postwire.metrics.views import RATES, Period, period_counts, period_start, rates

UNCOUNTED: Final = ("received", "failed")
METRICS: Final = (*COUNTS, *UNCOUNTED, *RATES)
DIMENSIONS: Final = ("period", "domain")
PERIODS: Final = ("hourly", "daily", "weekly", "monthly")
MAX_PERIODS: Final = 10_000
MAX_DOMAINS: Final = 100
_UTC_NAMES: Final = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "Zulu", "Universal"})


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


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("email_metrics", __name__)

    @blueprint.get("/emails/metrics")
    async def email_metrics() -> MetricsBody:
        team_id = current_caller().team_id
        args = request.args
        zone = parse_zone(args.get("timezone"))
        granularity = args.get("granularity") or "daily"
        if granularity not in PERIODS:
            raise validation_error("`granularity` must be one of hourly, daily, weekly, monthly.")
        period = cast(Period, granularity)
        names = listed(args, "metrics") or list(METRICS)
        unknown = [name for name in names if name not in METRICS]
        if unknown:
            raise validation_error(
                f"Unknown metric {unknown[0]!r}: the metrics are {', '.join(METRICS)}."
            )
        dimensions = listed(args, "dimensions")
        if any(d not in DIMENSIONS for d in dimensions):
            raise validation_error("`dimensions` may be period and domain (Postwire keeps no "
                                   "per-email or per-broadcast breakdown).")  # fmt: skip
        if listed(args, "email_id") or listed(args, "broadcast_id"):
            raise validation_error("Postwire filters metrics by domain_id only.")
        now = ctx.now()
        stop = min(parse_moment(args["end_date"], "end_date", zone), now) if args.get(
            "end_date") else now  # fmt: skip
        if args.get("start_date"):
            start = parse_moment(args["start_date"], "start_date", zone)
        else:
            first_day = stop.astimezone(zone).date() - timedelta(days=6)
            start = datetime(first_day.year, first_day.month, first_day.day, tzinfo=zone)
        if start > stop:
            raise validation_error("`start_date` must be on or before `end_date`.")
        domains, _ = list_domains(ctx.spool, team_id)
        names_by_id = {domain.id: domain.name for domain in domains}
        wanted = listed(args, "domain_id")
        if len(wanted) > MAX_DOMAINS:
            raise validation_error(f"At most {MAX_DOMAINS} `domain_id` values.")
        if any(domain_id not in names_by_id for domain_id in wanted):
            raise validation_error("A `domain_id` is not one of this team's domains.")
        starts = []
        if "period" in dimensions:
            for moment in periods(start, stop, period, zone):
                starts.append(moment)
                if len(starts) > MAX_PERIODS:
                    raise validation_error(
                        f"The range holds more than {MAX_PERIODS:,} {granularity} periods."
                    )

        # Scope -> period -> counts; the team as a whole (None) unless domains are asked for.
        scopes: list[str | None] = list(wanted) or (
            list(names_by_id) if "domain" in dimensions else [None]
        )
        counted = {
            scope: period_counts(ctx.spool, team_id, domain_scope(scope), start, stop, zone, period)
            for scope in scopes
        }
        if "domain" not in dimensions:  # the domains asked for, as one
            counted = {None: _merged(counted.values())}
        totals = _summed(row for by_period in counted.values() for row in by_period.values())
        body: MetricsBody = {
            "object": "metrics", "start_date": iso(start), "end_date": iso(stop),
            "metrics": names, "dimensions": dimensions, "granularity": period,
            "totals": metric_values(totals, names),
        }  # fmt: skip
        if dimensions:
            body["data"] = _rows(counted, dimensions, starts, names, names_by_id, period)
        return body

    return blueprint


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
    counted: dict[str | None, dict[datetime, dict[str, int]]],
    dimensions: list[str],
    starts: list[datetime],
    names: list[str],
    names_by_id: dict[str, str],
    period: Period,
) -> list[dict[str, str | int | float]]:
    """The `data` rows: every period of the range (with `period`), for each domain that has
    counts (with `domain`), in period then domain-name order."""
    by_domain = "domain" in dimensions
    scopes = sorted(
        (scope for scope, found in counted.items() if found or not by_domain),
        key=lambda scope: names_by_id.get(scope or "", ""),
    )
    rows: list[dict[str, str | int | float]] = []
    for moment in starts if "period" in dimensions else [None]:
        for scope in scopes:
            row: dict[str, str | int | float] = {}
            if moment is not None:
                row["period"] = period_label(moment, period)
                counts = counted[scope].get(moment, {})
            else:
                counts = _summed(counted[scope].values())
            if by_domain and scope is not None:
                row |= {"domain_id": scope, "domain_name": names_by_id[scope]}
            row.update(metric_values(counts, names))
            rows.append(row)
    return rows
