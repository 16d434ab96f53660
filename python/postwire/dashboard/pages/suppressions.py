"""Suppressions: the team's addresses that mail is no longer sent to (hard bounces,
complaints, and those added here), searched by address, one added or removed by hand.

The writes are `postwire.suppressions`', shared with the REST API.
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, g, render_template, request

from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.cursor_pages import page_after
from postwire.dashboard.pages.refusals import Redirect, done, found_or_404, refused
from postwire.domains.store import format_timestamp
from postwire.errors import ApiError
from postwire.suppressions import (
    ORIGINS,
    add_suppression,
    find_suppression,
    remove_suppression,
    team_suppressions_parked,
)

PER_PAGE: Final = 50
ORIGIN_WORDS: Final = {"bounce": "Hard bounce", "complaint": "Complaint", "manual": "Added by hand"}


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("suppressions", __name__)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    @blueprint.get("/suppressions")
    async def list_page() -> str:
        search = request.args.get("q", "")
        origin = request.args.get("origin") or None
        if origin not in (None, *ORIGINS):
            origin = None
        found = await team_suppressions_parked(
            ctx.spool, team_id(), origin=origin, containing=search
        )
        after = request.args.get("after")
        shown, next_after = page_after(found, after, lambda record: record.id, PER_PAGE)
        return await render_template(
            "suppressions.html",
            suppressions=shown,
            added={record.id: format_timestamp(record.created_at_ms)[:16] for record in shown},
            search=search,
            origin=origin,
            origins=ORIGIN_WORDS,
            next_after=next_after,
            paged=after is not None,
        )

    @blueprint.post("/suppressions")
    async def add() -> Redirect:
        email = (await request.form).get("email", "").strip()
        try:
            record = await add_suppression(
                ctx.spool, team_id(), email, int(ctx.now_seconds() * 1000)
            )
        except ApiError as error:
            return await refused(error, "/suppressions")
        return await done(f"Mail to {record.email} is suppressed.", "/suppressions")

    @blueprint.post("/suppressions/<suppression_id>/delete")
    async def remove(suppression_id: str) -> Redirect:
        record = found_or_404(lambda: find_suppression(ctx.spool, team_id(), suppression_id))
        await remove_suppression(ctx.spool, team_id(), record)
        return await done(f"Mail to {record.email} is sent again.", "/suppressions")

    return blueprint
