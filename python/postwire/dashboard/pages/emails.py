"""The Emails pages: the team's emails (the landing page after login) and an email's page.

    GET /emails                   newest first; filters, search, cursor paging (email_filters)
    GET /emails/status?id=...     the `last_event` of listed emails, for the live badges
    GET /emails/<id>              its details, event timeline, delivery attempts, parts
    GET /emails/<id>/html         its HTML, for the page's sandboxed frame (its own CSP)
    GET /emails/<id>/raw          its raw source, downloaded as a .eml file

A scheduled email's Reschedule and Cancel forms post to `email_schedule`'s routes.

Every look-up is under the viewer's team: another team's email id is a 404 like a missing one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from quart import Blueprint, Response, g, render_template, request
from werkzeug.exceptions import NotFound

from postwire.concurrency import in_order
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.email_filters import STATUSES, is_email_id, parse_email_query
from postwire.dashboard.email_source import SourceParts, source_parts
from postwire.dashboard.time_zones import time_zones
from postwire.dashboard.viewer import Viewer
from postwire.domains.store import list_domains_parked
from postwire.insights.reading import EmailInsights, by_area, read_email_insights_parked
from postwire.store.accounts import list_api_keys_parked
from postwire.store.deliveries import email_attempts_parked
from postwire.store.email_details import (
    EVENT_SCAN_BUDGET,
    RawSource,
    email_events_parked,
    raw_source_parked,
)
from postwire.store.email_search import SCAN_BUDGET, find_emails
from postwire.store.emails import EMAILS, EmailRecord, email_key

PAGE_SIZE: Final = 50
# Emails a list request reads at most before answering with what it found.
READ_BUDGET = SCAN_BUDGET
# Ids a live-status request may ask about (a page's worth).
MAX_STATUS_IDS: Final = PAGE_SIZE
# The HTML frame runs no script and reaches nothing but images: it is the sender's content.
HTML_FRAME_POLICY: Final = (
    "sandbox; default-src 'none'; img-src data: https:; style-src 'unsafe-inline'; "
    "font-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("emails", __name__)
    bp.add_app_template_filter(ms_utc, "ms_utc")

    @bp.get("/emails")
    async def list_page() -> str:
        viewer = _viewer()
        query = parse_email_query(request.args)
        page = await find_emails(
            ctx.spool,
            viewer.team.id,
            query.wanted,
            limit=PAGE_SIZE,
            after=query.after,
            before=None if query.after is not None else query.before,
            budget=READ_BUDGET,
        )
        domains, _ = await list_domains_parked(ctx.spool, viewer.team.id)
        keys = await list_api_keys_parked(ctx.spool, viewer.team.id)
        return await render_template(
            "emails.html",
            query=query,
            page=page,
            status_options=[(status, status.replace("_", " ")) for status in STATUSES],
            domain_options=[(domain.id, domain.name) for domain in domains],
            key_options=[(key.id, key.name) for key in keys],
            domain_names={domain.id: domain.name for domain in domains},
        )

    @bp.get("/emails/status")
    async def live_statuses() -> dict[str, Any]:
        team_id = _viewer().team.id
        ids = [i for i in request.args.getlist("id")[:MAX_STATUS_IDS] if is_email_id(i)]

        async def email_of(email_id: str) -> EmailRecord | None:
            return await EMAILS.aget(ctx.spool, email_key(team_id, email_id))

        found = dict(zip(ids, await in_order(email_of, ids, at_once=MAX_STATUS_IDS), strict=True))
        return {"statuses": {i: r.last_event for i, r in found.items() if r is not None}}

    @bp.get("/emails/<email_id>")
    async def email_page(email_id: str) -> str:
        record = await team_email(ctx, email_id)
        source = await email_source(ctx, record)
        parts = source_parts(source.content) if source is not None else SourceParts()
        events = await email_events_parked(ctx.spool, record)
        now_ms = int(ctx.now().timestamp() * 1000)
        keys = {key.id: key for key in await list_api_keys_parked(ctx.spool, record.team_id)}
        domains, _ = await list_domains_parked(ctx.spool, record.team_id)
        return await render_template(
            "emails_detail.html",
            email=record,
            events=events,
            attempts=await email_attempts_parked(ctx.spool, record.team_id, record.id, now_ms),
            source=source,
            headers=parts.headers,
            html=record.html if record.html is not None else parts.html,
            text=record.text if record.text is not None else parts.text,
            key=keys.get(record.api_key_id or ""),
            domain=next((d for d in domains if d.id == record.domain_id), None),
            insights=await email_insights(ctx, record),
            insights_by_area=by_area,
            insights_enabled=ctx.config.insights.enabled,
            event_budget=EVENT_SCAN_BUDGET,
            time_zones=time_zones(),
        )

    @bp.get("/emails/<email_id>/html")
    async def email_html(email_id: str) -> Response:
        record = await team_email(ctx, email_id)
        html = record.html
        if html is None:
            source = await email_source(ctx, record)
            html = source_parts(source.content).html if source is not None else None
        if html is None:
            raise NotFound
        response = Response(html, mimetype="text/html")
        response.headers["Content-Security-Policy"] = HTML_FRAME_POLICY
        return response

    @bp.get("/emails/<email_id>/raw")
    async def email_raw(email_id: str) -> Response:
        record = await team_email(ctx, email_id)
        source = await email_source(ctx, record)
        if source is None:
            raise NotFound(
                "Postwire keeps an email's raw source only until it is delivered; this one "
                "has been, so its source is no longer kept."
            )
        response = Response(source.content, mimetype="message/rfc822")
        # The id was checked to be a UUID: nothing in this header comes from the sender.
        response.headers["Content-Disposition"] = f'attachment; filename="{record.id}.eml"'
        return response

    return bp


def ms_utc(ms: int) -> str:
    """Milliseconds since the epoch as `2026-11-25 10:00:00` (UTC), as the page shows times."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _viewer() -> Viewer:
    viewer: Viewer = g.viewer
    return viewer


async def team_email(ctx: DashboardContext, email_id: str) -> EmailRecord:
    """The viewer's team's email `email_id`; 404 for any other id, another team's included."""
    if not is_email_id(email_id):
        raise NotFound
    record = await EMAILS.aget(ctx.spool, email_key(_viewer().team.id, email_id))
    if record is None:
        raise NotFound
    return record


async def email_source(ctx: DashboardContext, record: EmailRecord) -> RawSource | None:
    """The email's raw source wherever it is still kept; the sandbox inbox is looked in
    whatever the mode, for an email sent by an earlier sandboxed run."""
    return await raw_source_parked(ctx.spool, record, sandboxed=True)


async def email_insights(ctx: DashboardContext, record: EmailRecord) -> EmailInsights | None:
    """The email's deliverability insights; None while not computed (the page says whether
    they will be: `insights.enabled`)."""
    return await read_email_insights_parked(ctx.spool, record.team_id, record.id)
