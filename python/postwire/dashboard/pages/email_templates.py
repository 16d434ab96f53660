"""Templates: the team's email templates, a new one, a template's page (its working copy as a
form, publishing, its published versions) and deletion after a confirmation page.

    GET  /templates                  newest first, 50 a page (`after`: the last id shown)
    POST /templates                  a new draft (name and HTML at least), then its page
    GET  /templates/<id>             the working copy (a form for admins), versions (`after`)
    POST /templates/<id>             save the working copy
    POST /templates/<id>/publish     sends use the working copy from now on
    POST /templates/<id>/duplicate   a new draft of the same content
    GET  /templates/<id>/delete      the confirmation; POST deletes

The rules and writes are `templates.editing`'s, shared with the REST API. A refused save shows
the form again as it was typed, with the reason in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from quart import Blueprint, g, render_template, request
from werkzeug.exceptions import NotFound

from postwire.broadcasts.drafts import looks_like_id
from postwire.dashboard.access import requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.refusals import Redirect, done, in_plain_words
from postwire.dashboard.template_form import body_from_form, form_of
from postwire.errors import ApiError
from postwire.store import templates as store
from postwire.store.templates import TemplateRecord
from postwire.templates import editing
from postwire.templates.variables import VARIABLE_TYPES

TEMPLATES_PER_PAGE: Final = 50
VERSIONS_PER_PAGE: Final = 20


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("email_templates", __name__)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    async def team_template(template_id: str) -> TemplateRecord:
        # Ids only: an alias is the API's way in, and a long one is no key the store can hold
        # (no alias looks like an id, so the id's record is the whole look-up).
        if not looks_like_id(template_id):
            raise NotFound
        record = await store.get_template_parked(ctx.spool, team_id(), template_id)
        if record is None:
            raise NotFound
        return record

    async def list_page(form: Mapping[str, str] | None = None, error: str | None = None) -> str:
        after = request.args.get("after")
        records, has_more = await store.templates_page_parked(
            ctx.spool,
            team_id(),
            after=after if after and looks_like_id(after) else None,
            before=None,
            limit=TEMPLATES_PER_PAGE,
        )
        return await render_template(
            "email_templates.html",
            templates=records,
            next_after=records[-1].id if has_more and records else None,
            paged=after is not None,
            form=form or {},
            error=error,
        )

    async def template_page(
        record: TemplateRecord, form: Mapping[str, str] | None = None, error: str | None = None
    ) -> str:
        after = request.args.get("after")
        versions, has_more = await store.versions_page_parked(
            ctx.spool,
            record,
            after=after if after and looks_like_id(after) else None,
            before=None,
            limit=VERSIONS_PER_PAGE,
        )
        return await render_template(
            "email_templates_detail.html",
            template=record,
            form=form or form_of(record),
            error=error,
            versions=versions,
            next_after=versions[-1].id if has_more and versions else None,
            paged=after is not None,
            variable_types=VARIABLE_TYPES,
        )

    @bp.get("/templates")
    async def templates_list() -> str:
        return await list_page()

    @bp.post("/templates")
    async def create() -> Redirect | tuple[str, int]:
        form = await request.form
        try:
            record = await editing.create_template(
                ctx.spool, team_id(), body_from_form(form), ctx.now()
            )
        except ApiError as error:
            return await list_page(form, in_plain_words(error)), 422
        return await done(
            f"The template {record.name} was created: it is a draft until you publish it.",
            f"/templates/{record.id}",
        )

    @bp.get("/templates/<template_id>")
    async def template_view(template_id: str) -> str:
        return await template_page(await team_template(template_id))

    @bp.post("/templates/<template_id>")
    async def save(template_id: str) -> Redirect | tuple[str, int]:
        record = await team_template(template_id)
        form = await request.form
        try:
            saved = await editing.update_template(
                ctx.spool, team_id(), record.id, body_from_form(form), ctx.now()
            )
        except ApiError as error:
            if error.status == 404:
                raise NotFound from error
            return await template_page(record, form, in_plain_words(error)), 422
        message = "Saved." + (
            " Publish to send with these changes." if saved.status == "published" else ""
        )
        return await done(message, f"/templates/{record.id}")

    @bp.post("/templates/<template_id>/publish")
    async def publish(template_id: str) -> Redirect:
        record = await team_template(template_id)
        published = await editing.publish_template(ctx.spool, team_id(), record.id, ctx.now())
        if published.versions == record.versions:
            return await done("Nothing new to publish.", f"/templates/{record.id}")
        return await done(
            f"Version {published.versions} is published: sends use it from now on.",
            f"/templates/{record.id}",
        )

    @bp.post("/templates/<template_id>/duplicate")
    async def duplicate(template_id: str) -> Redirect:
        record = await team_template(template_id)
        copy = await editing.duplicate_template(ctx.spool, team_id(), record.id, ctx.now())
        return await done(f"This is a new draft, {copy.name}.", f"/templates/{copy.id}")

    @bp.get("/templates/<template_id>/delete")
    @requires("admin")  # the confirmation of a change only admins may make
    async def confirm_delete(template_id: str) -> str:
        record = await team_template(template_id)
        return await render_template(
            "settings_confirm_delete.html",
            thing=f"the template {record.name}",
            consequence="Its versions go with it, and sends that name it are refused. "
            "This cannot be undone.",
            action=f"/templates/{record.id}/delete",
            cancel=f"/templates/{record.id}",
        )

    @bp.post("/templates/<template_id>/delete")
    async def delete(template_id: str) -> Redirect:
        record = await team_template(template_id)
        await editing.delete_template(ctx.spool, team_id(), record.id)
        return await done(f"The template {record.name} was deleted.", "/templates")

    return bp
