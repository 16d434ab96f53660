"""`GET /images/<id>.<ext>`: the images uploaded for broadcasts, as mail clients fetch them.

Public, like the tracking pixel: a mail client has no API key. The id (74 random bits) is what
keeps an image from being found; an image's bytes never change, so it is cached for a year and
revalidated by its ETag. The answer says what it is (`nosniff`) and runs nothing if opened as
a page (its own CSP and sandbox).
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, Response, request

from postwire.api.context import ApiContext
from postwire.broadcasts.drafts import looks_like_id
from postwire.broadcasts.images import image_answer
from postwire.errors import ApiError
from postwire.store.images import get_image

PUBLIC_PREFIX: Final = "/images/"
IMAGE_CACHE: Final = "public, max-age=31536000, immutable"
IMAGE_POLICY: Final = "default-src 'none'; img-src 'self'; sandbox"


def _not_found() -> ApiError:
    return ApiError(404, "not_found", "The requested endpoint does not exist.")


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("images", __name__)

    @blueprint.get(PUBLIC_PREFIX + "<image_id>.<ext>")
    async def image(image_id: str, ext: str) -> Response:
        record = get_image(ctx.spool, image_id.lower()) if looks_like_id(image_id) else None
        if record is None or record.extension != ext.lower():
            raise _not_found()
        answer = image_answer(ctx.spool, record, request.headers.get("If-None-Match", ""))
        if answer is None:
            raise _not_found()
        headers = {
            "Cache-Control": IMAGE_CACHE,
            "ETag": answer.etag,
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": IMAGE_POLICY,
            # Shown by pages of other origins (webmail, the preview of the dashboard's editor).
            "Cross-Origin-Resource-Policy": "cross-origin",
        }
        return Response(
            answer.content, status=answer.status, content_type=answer.mimetype, headers=headers
        )

    return blueprint
