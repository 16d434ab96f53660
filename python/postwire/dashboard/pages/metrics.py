"""The Metrics page: sent, delivered, bounced, complained, opened, clicked, unsubscribed and
suppressed over a range of UTC hours or days, for the team or one of its sending domains,
broadcasts or tags; totals and rates, charts drawn on the server as SVG, and a table. Read
from the counters kept as events happen, never by scanning emails. A GET form (range,
granularity, domain, broadcast, tag), so it works without JavaScript and its address can be
bookmarked or shared."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Final

from markupsafe import Markup
from quart import Blueprint, g, render_template, request
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import NotFound

from postwire.dashboard.charts import Series, bar_chart, line_chart
from postwire.dashboard.context import DashboardContext
from postwire.domains.store import list_domains_parked, load_domain_parked
from postwire.metrics.counters import MAX_COUNTED_TAGS, OTHER_TAG, TEAM, Granularity, Scope
from postwire.metrics.health import MIN_VOLUME, THRESHOLDS, window_checks
from postwire.metrics.views import (
    PRESETS,
    MetricsRange,
    MetricsReport,
    dates_range,
    metrics_report,
    preset_range,
    rates,
)
from postwire.store.broadcasts import BROADCASTS, broadcasts_prefix, get_broadcast_parked
from postwire.store.metric_counters import list_counted_tags_parked, tags_at_bound_parked

DEFAULT_PRESET: Final = "7d"
# Broadcasts and tags the filters list at most: the latest broadcasts (each a whole record,
# its HTML included, is read), tags in name order.
MAX_BROADCASTS_LISTED: Final = 50
MAX_TAGS_LISTED: Final = 200
# The colours of the charts (SVG presentation attributes; metrics.css uses the same).
COLOURS: Final = {
    "sent": "#1f5fbf",
    "delivered": "#12a150",
    "bounced": "#d92d20",
    "complained": "#b54708",
    "delivery_delayed": "#f2b01e",
    "suppressed": "#98a2b3",
    "opened": "#7a5af8",
    "clicked": "#0ba5ec",
    "bounce_rate": "#d92d20",
    "complaint_rate": "#b54708",
}


@dataclass(frozen=True, slots=True)
class MetricsQuery:
    """What the form asked for, as the form shows it again, and the range it means."""

    preset: str  # "24h" | "7d" | "30d" | "custom"
    granularity: Granularity
    first_day: date  # the custom range's days (shown in the form whatever the preset)
    last_day: date
    domain_id: str | None
    span: MetricsRange
    error: str | None = None  # what was wrong with the request, in plain words
    broadcast_id: str | None = None
    tag: str | None = None  # a counted tag's label, `name:value`, or OTHER_TAG

    @property
    def scope(self) -> Scope:
        """The counts shown: of one domain, broadcast or tag (the first chosen), or all."""
        if self.domain_id is not None:
            return Scope("domain", self.domain_id)
        if self.broadcast_id is not None:
            return Scope("broadcast", self.broadcast_id)
        if self.tag is not None:
            return Scope("tag", self.tag)
        return TEAM


def read_query(args: MultiDict[str, str], now: datetime) -> MetricsQuery:
    """The page's query from its URL arguments; anything wrong falls back to the default
    range with an `error` to show, never a failure."""
    preset = args.get("range", DEFAULT_PRESET)
    asked = args.get("granularity", "")
    granularity: Granularity | None = asked if asked in ("hour", "day") else None  # type: ignore[assignment]
    domain_id = args.get("domain") or None
    broadcast_id = args.get("broadcast") or None
    tag = args.get("tag") or None
    today = now.date()
    error = None
    if sum(chosen is not None for chosen in (domain_id, broadcast_id, tag)) > 1:
        # Counts are kept per domain, per broadcast and per tag, not per combination.
        error = "Choose one of a domain, a broadcast or a tag: the first chosen is shown."
        broadcast_id = None if domain_id is not None else broadcast_id
        tag = None if domain_id is not None or broadcast_id is not None else tag
    try:
        first_day = date.fromisoformat(args.get("from", "") or today.isoformat())
        last_day = date.fromisoformat(args.get("to", "") or today.isoformat())
    except ValueError:
        first_day = last_day = today
        error = error or "Dates are written as YYYY-MM-DD."
    span: MetricsRange | None = None
    if preset == "custom" and error is None:
        if last_day < first_day:
            error = "The range ends before it starts."
        else:
            try:
                span = dates_range(first_day, last_day, granularity or "day")
            except ValueError as exc:
                error = str(exc)
    elif preset not in PRESETS and preset != "custom":
        error = "Choose a range from the list."
    if span is None:
        if preset not in PRESETS:
            preset = DEFAULT_PRESET
        span = preset_range(preset, now, granularity)
    if preset != "custom":
        first_day, last_day = span.start.date(), span.bucket_start(span.end - 1).date()
    return MetricsQuery(
        preset, span.granularity, first_day, last_day, domain_id, span, error, broadcast_id, tag
    )


def bucket_label(moment: datetime, granularity: Granularity) -> str:
    """A bucket as a tooltip names it."""
    return moment.strftime("%d %b %H:00" if granularity == "hour" else "%d %b %Y")


def axis_label(moment: datetime, granularity: Granularity) -> str:
    """A bucket under a chart's axis: the hour alone (with the day at midnight) or the day."""
    if granularity == "hour" and moment.hour:
        return moment.strftime("%H:00")
    return moment.strftime("%d %b")


def charts(report: MetricsReport) -> list[tuple[str, Markup, list[Series]]]:
    """(heading, svg, its series for the legend) of each chart of the page."""
    span = report.range
    labels = [bucket_label(moment, span.granularity) for moment, _ in report.series]
    ticks = [axis_label(moment, span.granularity) for moment, _ in report.series]
    rows = [row for _, row in report.series]

    def series(*names: str, words: dict[str, str]) -> list[Series]:
        return [Series(words[n], n, COLOURS[n], [row[n] for row in rows]) for n in names]

    sent = series("sent", words={"sent": "Sent"})
    outcomes = series(
        "delivered", "delivery_delayed", "bounced", "complained", "suppressed",
        words={"delivered": "Delivered", "delivery_delayed": "Delayed", "bounced": "Bounced",
               "complained": "Complained", "suppressed": "Suppressed"},
    )  # fmt: skip
    engagement = series("opened", "clicked", words={"opened": "Opened", "clicked": "Clicked"})
    per_bucket_rates = [rates(row) for row in rows]
    rate_series = [
        Series(words, key, COLOURS[key], [r[key] for r in per_bucket_rates])
        for key, words in (("bounce_rate", "Bounce rate"), ("complaint_rate", "Complaint rate"))
    ]
    bars = [("Sent", sent), ("Delivery outcomes", outcomes)]
    lines = [("Opens and clicks", engagement, ""), ("Bounce and complaint rates", rate_series, "%")]
    return [
        *((title, bar_chart(title, labels, s, axis_labels=ticks), s) for title, s in bars),
        *(
            (title, line_chart(title, labels, s, unit=unit, axis_labels=ticks), s)
            for title, s, unit in lines
        ),
    ]


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("metrics", __name__)

    @bp.get("/metrics")
    async def metrics_page() -> str:
        team_id = g.viewer.team.id
        query = read_query(request.args, ctx.now())
        domain = broadcast = None
        if query.domain_id is not None:
            domain = await load_domain_parked(ctx.spool, team_id, query.domain_id)
            if domain is None:  # another team's, or gone: nothing to show here
                raise NotFound
        if query.broadcast_id is not None:
            broadcast = await get_broadcast_parked(ctx.spool, team_id, query.broadcast_id)
            if broadcast is None:
                raise NotFound
        report = await metrics_report(ctx.spool, team_id, query.scope, query.span)
        domains, _ = await list_domains_parked(ctx.spool, team_id)
        broadcasts = await BROADCASTS.ascan(
            ctx.spool, prefix=broadcasts_prefix(team_id), reverse=True, limit=MAX_BROADCASTS_LISTED
        )
        labels = {
            moment: moment.strftime("%Y-%m-%d %H:00" if query.granularity == "hour" else "%Y-%m-%d")
            for moment, _ in report.series
        }
        active = [
            (labels[moment], row, rates(row))
            for moment, row in reversed(report.series)
            if any(row.values())
        ]
        return await render_template(
            "metrics.html",
            query=query,
            presets=PRESETS,
            report=report,
            domain=domain,
            broadcast=broadcast,
            domains=sorted(domains, key=lambda d: d.name),
            broadcasts=[record for _, record in broadcasts],
            tags=[*await list_counted_tags_parked(ctx.spool, team_id, MAX_TAGS_LISTED), OTHER_TAG],
            tags_full=await tags_at_bound_parked(ctx.spool, team_id),
            max_tags=MAX_COUNTED_TAGS,
            charts=charts(report),
            rows=active,
            # The range's rates judged as domain health judges a window (same thresholds and
            # minimum volume), so the page and the Domains page never disagree.
            health={check.metric: check for check in window_checks("range", report.totals)},
            thresholds={threshold.metric: threshold for threshold in THRESHOLDS},
            min_volume=MIN_VOLUME,
        )

    return bp
