"""Image uploads for the broadcast editor, and the team's images for reuse.

    POST /broadcasts/images   multipart field `file` (CSRF token in the `X-CSRF-Token` header
                              or the form): 201 {"id", "url", "width", "height"}, or 4xx
                              {"error": "<in words>"}
    GET  /broadcasts/images   the team's newest images: {"data": [{"id", "url", "width",
                              "height", "name", "created_at"}]}
    GET  /broadcasts/images/<id>  one of the team's images, for the editor's canvas: the page's
                              policy (`img-src 'self'`) loads nothing from `api.public_url`;
                              another team's id is a 404

The checks are `broadcasts.images`'; the images are served to mail clients by the REST API
(`GET /images/<id>.<ext>` on `api.public_url`).
"""

from __future__ import annotations

from typing import Any, Final

from quart import Blueprint, Response, g, request
from werkzeug.exceptions import NotFound

from postwire.broadcasts.drafts import looks_like_id
from postwire.broadcasts.images import image_answer, image_url, save_image, too_large
from postwire.dashboard.context import DashboardContext
from postwire.errors import ApiError
from postwire.store.images import ImageRecord, get_team_image, team_images

# A multipart body holds the file and a little more (boundaries, headers, the CSRF field).
MULTIPART_OVERHEAD: Final = 16 * 1024
LISTED: Final = 100
# An image's bytes never change; behind a session, so kept by this browser only.
THUMBNAIL_CACHE: Final = "private, max-age=31536000, immutable"
# Opened as a page, the image shows and nothing runs; no page of any origin frames it.
THUMBNAIL_POLICY: Final = "default-src 'none'; img-src 'self'; sandbox; frame-ancestors 'none'"

JsonAnswer = tuple[dict[str, Any], int]


def add_routes(bp: Blueprint, ctx: DashboardContext) -> None:
    def described(record: ImageRecord) -> dict[str, Any]:
        return {
            "id": record.id,
            "url": image_url(ctx.config.api.public_url, record),
            "width": record.width,
            "height": record.height,
            "name": record.name,
            "created_at": record.created_at,
        }

    @bp.post("/broadcasts/images")
    async def upload_image() -> JsonAnswer:
        max_bytes = ctx.config.broadcasts.max_image_bytes
        length = request.content_length
        if length is not None and length > max_bytes + MULTIPART_OVERHEAD:
            # Refused before the body is read (the app drains what is left).
            return {"error": too_large(max_bytes).message}, 413
        upload = (await request.files).get("file")
        if upload is None or not upload.filename:
            return {"error": "Choose an image file to upload (the form field `file`)."}, 400
        content = upload.read(max_bytes + 1)
        try:
            record = await save_image(
                ctx.spool, g.viewer.team.id, content,
                name=upload.filename, max_bytes=max_bytes, now=ctx.now(),
            )  # fmt: skip
        except ApiError as error:
            return {"error": error.message}, error.status
        found = described(record)
        return {key: found[key] for key in ("id", "url", "width", "height")}, 201

    @bp.get("/broadcasts/images")
    async def list_images() -> JsonAnswer:
        records = team_images(ctx.spool, g.viewer.team.id, limit=LISTED)
        return {"data": [described(record) for record in records]}, 200

    @bp.get("/broadcasts/images/<image_id>")
    async def team_image(image_id: str) -> Response:
        found = looks_like_id(image_id)
        record = get_team_image(ctx.spool, g.viewer.team.id, image_id.lower()) if found else None
        if record is None:
            raise NotFound
        answer = image_answer(ctx.spool, record, request.headers.get("If-None-Match", ""))
        if answer is None:
            raise NotFound
        response = Response(answer.content, status=answer.status, content_type=answer.mimetype)
        response.headers.update(
            {
                "Cache-Control": THUMBNAIL_CACHE,
                "ETag": answer.etag,
                "Content-Security-Policy": THUMBNAIL_POLICY,
                "Cross-Origin-Resource-Policy": "same-origin",
            }
        )
        return response
