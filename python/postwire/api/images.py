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
from postwire.errors import ApiError
from postwire.store.images import get_image, image_content

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
        etag = f'"{record.sha256}"'
        headers = {
            "Cache-Control": IMAGE_CACHE,
            "ETag": etag,
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": IMAGE_POLICY,
            # Shown by pages of other origins (the dashboard's editor, webmail).
            "Cross-Origin-Resource-Policy": "cross-origin",
        }
        if etag in request.headers.get("If-None-Match", ""):
            return Response(b"", status=304, headers=headers)
        content = image_content(ctx.spool, record.id)
        if content is None:
            raise _not_found()
        return Response(content, content_type=record.mimetype, headers=headers)

    return blueprint
