"""`/t/o/<token>` and `/t/c/<token>`: the open pixel and the click redirect that tracked mail
links to (`webhooks.tracking` signs and reads the tokens and records the events).

Public: a recipient's mail client has no API key, and no team's rate limit applies. A token this
server did not sign is a 404 like any unknown path. A HEAD request (link scanners, prefetchers)
is answered the same but records nothing, and so is a request whose event cannot be written:
the recipient still gets the image or reaches the link.
"""

from __future__ import annotations

import logging
from typing import Final

from quart import Blueprint, Response, request

from postwire.api.context import ApiContext
from postwire.errors import ApiError, SpoolError
from postwire.webhooks.tracking import (
    CLICK_PATH,
    OPEN_PATH,
    record_click,
    record_open,
    redirect_location,
)

log = logging.getLogger("postwire.api")

PUBLIC_PREFIX: Final = "/t/"
# A transparent 1x1 GIF.
PIXEL_GIF: Final = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
# Every fetch must reach us to count, through browsers, mail clients and proxies alike.
NO_CACHE: Final = {
    "Cache-Control": "no-cache, no-store, must-revalidate, private, max-age=0",
    "Pragma": "no-cache",
    "Expires": "0",
}


def _not_found() -> ApiError:
    return ApiError(404, "not_found", "The requested endpoint does not exist.")


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("tracking", __name__)

    @blueprint.get(OPEN_PATH + "<token>")
    async def opened(token: str) -> Response:
        email = (await ctx.tracking.signer()).read_open(token)
        if email is None:
            raise _not_found()
        if request.method == "GET":
            try:
                await record_open(ctx.spool, email, ctx.now())
            except SpoolError:
                log.exception("could not record an open of %s", email.email_id)
        return Response(PIXEL_GIF, content_type="image/gif", headers=NO_CACHE)

    @blueprint.get(CLICK_PATH + "<token>")
    async def clicked(token: str) -> Response:
        link = (await ctx.tracking.signer()).read_click(token)
        if link is None:
            raise _not_found()
        if request.method == "GET":
            try:
                await record_click(
                    ctx.spool,
                    link,
                    ctx.now(),
                    ip_address=request.remote_addr or "",
                    user_agent=request.headers.get("User-Agent", ""),
                )
            except SpoolError:
                log.exception("could not record a click in %s", link.email_id)
        headers = {**NO_CACHE, "Location": redirect_location(link.link)}
        return Response(b"", status=302, headers=headers)

    return blueprint
