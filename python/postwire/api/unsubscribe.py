"""`/u/...`: the signed unsubscribe links of broadcasts (public: no API key).

- `POST /u/<token>` with the body `List-Unsubscribe=One-Click` (RFC 8058, as mailbox providers
  send it, form-encoded or multipart): unsubscribes at once, no page, no cookie; 200 with a
  one-line body.
- `GET /u/<token>`: the hosted page (`unsubscribe.page`); it changes nothing. Its buttons POST
  `action=unsubscribe` or `action=resubscribe` to the same URL, and its topic preferences to
  `/u/<token>/topics`; each answers with the page again.
- `GET /u/assets/<name>`: the page's stylesheet, its content hash in its name.

A token Postwire did not make (forged, edited, another contact's id swapped in) is a 404 page
for a person, and nothing changes.
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, Response, request

from postwire.api.context import ApiContext
from postwire.unsubscribe.apply import (
    Applied,
    find_recipient,
    resubscribe,
    save_preferences,
    unsubscribe,
)
from postwire.unsubscribe.links import (
    ONE_CLICK,
    UnsubscribeTarget,
    load_unsubscribe_secret,
    parse_token,
)
from postwire.unsubscribe.page import (
    ASSETS_PATH,
    PAGE_HEADERS,
    STYLESHEET,
    STYLESHEET_NAME,
    error_page,
    recipient_page,
)

PUBLIC_PREFIX: Final = "/u/"
_ONE_CLICK_FIELD, _, _ONE_CLICK_VALUE = ONE_CLICK.partition("=")
_BAD_LINK = (
    "This unsubscribe link is not valid",
    "The link may have been cut or changed on its way. Use the link in the email itself, "
    "exactly as it is.",
)
_GONE = (
    "You are not on the list",
    "This address is no longer on the mailing list: it receives no more emails from it.",
)


def _html(body: str, status: int = 200) -> Response:
    return Response(body, status=status, content_type="text/html; charset=utf-8",
                    headers=PAGE_HEADERS)  # fmt: skip


def _text(body: str, status: int = 200) -> Response:
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    return Response(body, status=status, content_type="text/plain; charset=utf-8",
                    headers=headers)  # fmt: skip


async def _is_one_click() -> bool:
    """Whether the POST carries RFC 8058's body, form-encoded or multipart; a client that sent
    it with no form content type is taken at its word too."""
    form = await request.form
    if form:
        return form.get(_ONE_CLICK_FIELD) == _ONE_CLICK_VALUE
    return (await request.get_data(as_text=True)).strip() == ONE_CLICK


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("unsubscribe", __name__)
    secret: list[bytes] = []  # loaded on first use

    async def target_of(token: str) -> UnsubscribeTarget | None:
        if not secret:
            secret.append(await load_unsubscribe_secret(ctx.spool))
        return parse_token(secret[0], token)

    def answer(token: str, applied: Applied | None, notice: str) -> Response:
        if applied is None:
            return _html(error_page(*_GONE), 404)
        return _html(recipient_page(applied.recipient, token, notice))

    @blueprint.get(ASSETS_PATH + "<name>")
    async def stylesheet(name: str) -> Response:
        if name != STYLESHEET_NAME:
            return _text("Not found\n", 404)
        headers = {"Cache-Control": "public, max-age=31536000, immutable"}
        return Response(STYLESHEET, content_type="text/css; charset=utf-8", headers=headers)

    @blueprint.get(PUBLIC_PREFIX + "<token>")
    async def page(token: str) -> Response:
        target = await target_of(token)
        if target is None:
            return _html(error_page(*_BAD_LINK), 404)
        recipient = find_recipient(ctx.spool, target)
        if recipient is None:
            return _html(error_page(*_GONE), 404)
        return _html(recipient_page(recipient, token))

    @blueprint.post(PUBLIC_PREFIX + "<token>")
    async def post(token: str) -> Response:
        target = await target_of(token)
        if target is None:
            return _html(error_page(*_BAD_LINK), 404)
        if await _is_one_click():
            # A deleted contact receives nothing: for the mailbox provider that is done too.
            await unsubscribe(ctx.spool, target, ctx.now_ms())
            return _text("Unsubscribed\n")
        action = (await request.form).get("action")
        if action == "unsubscribe":
            applied = await unsubscribe(ctx.spool, target, ctx.now_ms())
            return answer(token, applied, "You are unsubscribed.")
        if action == "resubscribe":
            applied = await resubscribe(ctx.spool, target, ctx.now_ms())
            return answer(token, applied, "You are subscribed again.")
        message = f"This address takes the one-click body {ONE_CLICK} (RFC 8058)."
        return _text(message + "\n", 400)

    @blueprint.post(PUBLIC_PREFIX + "<token>/topics")
    async def topics(token: str) -> Response:
        target = await target_of(token)
        if target is None:
            return _html(error_page(*_BAD_LINK), 404)
        chosen = set((await request.form).getlist("topic"))
        applied = await save_preferences(ctx.spool, target, chosen, ctx.now_ms())
        return answer(token, applied, "Your preferences are saved.")

    return blueprint
