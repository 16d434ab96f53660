"""Webhooks: the team's endpoints; a new endpoint (URL and event types, under the same SSRF
rules as the REST API); an endpoint's page with its recent events and each event's delivery
attempts, a change of its URL and event types, replay of an event, a new signing secret,
enable/disable and deletion.

A signing secret is shown once, on the page the POST that made it renders (`no-store`). The
rules and writes are `webhooks.endpoints`', shared with the REST API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from quart import Blueprint, Response, g, make_response, render_template, request

from postwire.dashboard.access import requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.cursor_pages import page_after
from postwire.dashboard.pages.refusals import Redirect, done, found_or_404_parked, refused
from postwire.domains.store import format_timestamp
from postwire.errors import ApiError
from postwire.webhooks import endpoints, messages
from postwire.webhooks.messages import WebhookMessage
from postwire.webhooks.store import EVENT_KINDS, WebhookRecord, team_webhooks_parked

EVENTS_PER_PAGE: Final = 25
STATUS_WORDS: Final = {"pending": "Pending", "succeeded": "Delivered", "failed": "Failed"}


def at_second(ms: int | None) -> str:
    return "" if ms is None else format_timestamp(ms)[:19] + " UTC"


@dataclass(frozen=True, slots=True)
class AttemptRow:
    at: str
    status_code: int | None
    error: str | None
    duration_ms: int


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event sent (or to be sent) to an endpoint, as its pages show it."""

    message: WebhookMessage
    created: str
    next_attempt: str
    attempts: list[AttemptRow]

    @property
    def status_words(self) -> str:
        return STATUS_WORDS.get(self.message.status, self.message.status)


def event_row(message: WebhookMessage) -> EventRow:
    attempts = [
        AttemptRow(
            at_second(attempt["at_ms"]),
            attempt.get("status_code"),
            attempt.get("error"),
            attempt["duration_ms"],
        )
        for attempt in message.attempts
    ]
    return EventRow(
        message, at_second(message.created_at_ms), at_second(message.next_attempt_ms), attempts
    )


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("webhooks", __name__)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    def allow_private() -> bool:
        return ctx.config.webhooks.allow_private_targets

    async def team_webhook(webhook_id: str) -> WebhookRecord:
        return await found_or_404_parked(
            lambda: endpoints.find_webhook_parked(ctx.spool, team_id(), webhook_id)
        )

    async def secret_page(webhook: WebhookRecord, *, created: bool) -> Response | Redirect:
        # The secret's one showing: this answer alone holds it, and no cache may keep it.
        page = await render_template("webhooks_secret.html", webhook=webhook, created=created)
        response = await make_response(page)
        response.headers["Cache-Control"] = "no-store"
        return response

    @blueprint.get("/webhooks")
    async def list_page() -> str:
        return await render_template(
            "webhooks.html",
            webhooks=(await team_webhooks_parked(ctx.spool, team_id()))[::-1],  # newest first
            event_kinds=EVENT_KINDS,
            default_events=[kind for kind in EVENT_KINDS if kind.startswith("email.")],
        )

    @blueprint.post("/webhooks")
    async def create() -> Response | Redirect:
        form = await request.form
        try:
            webhook = await endpoints.create_webhook(
                ctx.spool,
                team_id(),
                form.get("endpoint", "").strip(),
                form.getlist("events"),
                now=ctx.now(),
                allow_private=allow_private(),
            )
        except ApiError as error:
            return await refused(error, "/webhooks")
        return await secret_page(webhook, created=True)

    @blueprint.get("/webhooks/<webhook_id>")
    async def endpoint_page(webhook_id: str) -> str:
        webhook = await team_webhook(webhook_id)
        # Newest first.
        found = await messages.webhook_messages_parked(ctx.spool, webhook.team_id, webhook.id)
        after = request.args.get("after")
        shown, next_after = page_after(found, after, lambda m: m.event_id, EVENTS_PER_PAGE)
        return await render_template(
            "webhooks_endpoint.html",
            webhook=webhook,
            events=[event_row(message) for message in shown],
            next_after=next_after,
            paged=after is not None,
            event_kinds=EVENT_KINDS,
        )

    @blueprint.post("/webhooks/<webhook_id>")
    async def change(webhook_id: str) -> Redirect:
        webhook = await team_webhook(webhook_id)
        form = await request.form
        back = f"/webhooks/{webhook.id}"
        try:
            changed = await endpoints.update_webhook(
                ctx.spool,
                webhook.team_id,
                webhook.id,
                endpoint=form.get("endpoint", "").strip(),
                events=form.getlist("events"),
                allow_private=allow_private(),
            )
        except ApiError as error:
            return await refused(error, back)
        return await done(
            f"Saved: {', '.join(changed.events)} events go to {changed.endpoint}.", back
        )

    @blueprint.get("/webhooks/<webhook_id>/events/<event_id>")
    async def event_page(webhook_id: str, event_id: str) -> str:
        message = await found_or_404_parked(
            lambda: endpoints.find_message_parked(ctx.spool, team_id(), webhook_id, event_id)
        )
        payload = json.dumps(json.loads(message.payload), indent=2, ensure_ascii=False)
        return await render_template(
            "webhooks_event.html",
            webhook=await team_webhook(webhook_id),
            event=event_row(message),
            payload=payload,
        )

    @blueprint.post("/webhooks/<webhook_id>/events/<event_id>/replay")
    async def replay(webhook_id: str, event_id: str) -> Redirect:
        back = f"/webhooks/{webhook_id}/events/{event_id}"
        try:
            message = await endpoints.replay_message(
                ctx.spool, team_id(), webhook_id, event_id, now_ms=int(ctx.now_seconds() * 1000)
            )
        except ApiError as error:
            return await refused(error, back)
        if ctx.webhooks is not None:
            ctx.webhooks.wake()
        return await done(f"The {message.event_type} event will be sent again now.", back)

    @blueprint.post("/webhooks/<webhook_id>/status")
    async def change_status(webhook_id: str) -> Redirect:
        webhook = await team_webhook(webhook_id)
        status = (await request.form).get("status")
        back = f"/webhooks/{webhook.id}"
        try:
            await endpoints.update_webhook(
                ctx.spool, webhook.team_id, webhook.id, status=status, allow_private=allow_private()
            )
        except ApiError as error:
            return await refused(error, back)
        return await done(f"The endpoint is {status}.", back)

    @blueprint.post("/webhooks/<webhook_id>/rotate-secret")
    async def rotate_secret(webhook_id: str) -> Response | Redirect:
        webhook = await team_webhook(webhook_id)
        rotated = await endpoints.rotate_signing_secret(ctx.spool, webhook.team_id, webhook.id)
        return await secret_page(rotated, created=False)

    @blueprint.get("/webhooks/<webhook_id>/delete")
    @requires("admin")  # the confirmation of a change only admins may make
    async def confirm_delete(webhook_id: str) -> str:
        webhook = await team_webhook(webhook_id)
        return await render_template(
            "settings_confirm_delete.html",
            thing="this endpoint",
            consequence=f"{webhook.endpoint} will get no more events, and its events waiting "
            "to be sent are dropped.",
            action=f"/webhooks/{webhook.id}/delete",
            cancel=f"/webhooks/{webhook.id}",
        )

    @blueprint.post("/webhooks/<webhook_id>/delete")
    async def delete(webhook_id: str) -> Redirect:
        webhook = await team_webhook(webhook_id)
        try:
            await endpoints.delete_webhook(ctx.spool, webhook.team_id, webhook.id)
        except ApiError as error:
            return await refused(error, "/webhooks")
        return await done(f"The endpoint {webhook.endpoint} was deleted.", "/webhooks")

    return blueprint
