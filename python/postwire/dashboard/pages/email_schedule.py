"""A scheduled email's changes, from its page: a new time, or no sending at all.

    POST /emails/<id>/reschedule   scheduled_at: a date and time (datetime-local) in the IANA
                                   zone `time_zone` (UTC when absent)
    POST /emails/<id>/cancel       it is never sent; its status becomes `canceled`

Both answer with a redirect to the email's page, the outcome or refusal shown there. The rules
are the REST API's (`PATCH /emails/{id}`, `POST /emails/{id}/cancel`): only an email still
scheduled changes, to a time in the next 30 days; the writes are `store.emails`'.
"""

from __future__ import annotations

from quart import Blueprint, request

from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.emails import team_email
from postwire.dashboard.pages.refusals import Redirect, done, refused
from postwire.dashboard.time_zones import parse_schedule_input, scheduled_in_words
from postwire.errors import ApiError
from postwire.store import emails as email_store
from postwire.store.accounts import contract_timestamp


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("email_schedule", __name__)

    @bp.post("/emails/<email_id>/reschedule")
    async def reschedule(email_id: str) -> Redirect:
        record = await team_email(ctx, email_id)
        back = f"/emails/{record.id}"
        form = await request.form
        zone = form.get("time_zone", "UTC")
        try:
            when = parse_schedule_input(form.get("scheduled_at", ""), zone, ctx.now())
            changed = await email_store.reschedule_email(
                ctx.spool,
                record,
                contract_timestamp(when),
                int(when.timestamp() * 1000),
                int(ctx.now_seconds() * 1000),
            )
        except ApiError as error:
            return await refused(error, back)
        words = scheduled_in_words(changed.scheduled_at or "", zone)
        return await done(f"The email will be sent at {words}.", back)

    @bp.post("/emails/<email_id>/cancel")
    async def cancel(email_id: str) -> Redirect:
        record = await team_email(ctx, email_id)
        back = f"/emails/{record.id}"
        try:
            await email_store.cancel_email(ctx.spool, record, int(ctx.now_seconds() * 1000))
        except ApiError as error:
            return await refused(error, back)
        return await done("The email is canceled: it will not be sent.", back)

    return bp
