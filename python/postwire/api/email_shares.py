"""`POST /emails/{id}/share`: a signed, expiring public link that shows the email to anyone who
holds it, served by Postwire at `/shared/<token>` without an API key; `DELETE` revokes them.

A link lives `expires_in` (default and at most 48 hours, as the contract says) unless the
email's links are revoked first (`store.email_shares`). The page shows the email's headers and
its HTML in a sandboxed frame: the page itself is sandboxed by its CSP (an opaque origin: no
script runs, no cookie of this origin is read or sent by what it shows), loads nothing from
elsewhere (remote images stay blank: opening a link must not tell a tracker it was read), is
never framed by another site and is not cached.
"""

from __future__ import annotations

import html
import re
from typing import Final

from quart import Blueprint, Response

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.email_attachments import iso_timestamp
from postwire.api.email_content_models import RevokedShares, SharedEmail
from postwire.api.request_body import json_object
from postwire.errors import ApiError, validation_error
from postwire.public_links import open_link, sign_link
from postwire.store import emails as email_store
from postwire.store.email_shares import add_share, open_share, revoke_shares
from postwire.store.emails import EmailRecord

PUBLIC_PREFIX: Final = "/shared/"
MAX_SHARE_SECONDS: Final = 48 * 3600
_KIND: Final = "share"
_UNITS: Final = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
_DURATION: Final = re.compile(r"\s*(\d{1,9})\s*([a-z]+)\s*", re.IGNORECASE)
PAGE_POLICY: Final = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def parse_expires_in(value: object) -> int:
    """Seconds from `expires_in` ("10m", "2 hours", "1 day"); 48 hours when absent."""
    if value is None:
        return MAX_SHARE_SECONDS
    found = _DURATION.fullmatch(value) if isinstance(value, str) else None
    unit = None if found is None else _UNITS.get(found.group(2).lower())
    if found is None or unit is None:
        raise validation_error(
            "The `expires_in` field must be a duration such as `10m`, `2 hours` or `1 day`."
        )
    seconds = int(found.group(1)) * unit
    if not 0 < seconds <= MAX_SHARE_SECONDS:
        raise validation_error("The `expires_in` field must be more than 0 and at most 48 hours.")
    return seconds


def shared_page(record: EmailRecord) -> str:
    """The page of a shared link: every value escaped, the HTML body inside a sandboxed frame."""
    rows = "".join(
        f"<tr><th>{name}</th><td>{html.escape(value)}</td></tr>"
        for name, value in (
            ("From", record.sender),
            ("To", ", ".join(record.to)),
            ("Cc", ", ".join(record.cc)),
            ("Subject", record.subject),
            ("Date", record.created_at),
        )
        if value
    )
    if record.html is not None:
        body = (
            f'<iframe sandbox="" referrerpolicy="no-referrer" title="Email body" '
            f'srcdoc="{html.escape(record.html, quote=True)}"></iframe>'
        )
    else:
        body = f"<pre>{html.escape(record.text or '')}</pre>"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="robots" content="noindex">'
        f"<title>{html.escape(record.subject)}</title><style>"
        "body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f6f7;color:#111}"
        "main{max-width:900px;margin:0 auto;padding:16px}"
        "table{border-collapse:collapse;margin-bottom:12px;width:100%;table-layout:fixed}"
        "th{text-align:left;width:6em;color:#555;vertical-align:top;padding:2px 8px 2px 0}"
        "td{overflow-wrap:anywhere;padding:2px 0}"
        "iframe{width:100%;height:75vh;border:1px solid #ddd;background:#fff}"
        "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;padding:12px;"
        "border:1px solid #ddd}</style></head>"
        f"<body><main><table>{rows}</table>{body}</main></body></html>"
    )


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("email_shares", __name__)

    @blueprint.post("/emails/<id:email_id>/share")
    async def share_email(email_id: str) -> SharedEmail:
        body = await json_object()
        seconds = parse_expires_in(body.get("expires_in"))
        record = email_store.get_email(ctx.spool, current_caller().team_id, email_id)
        now_ms = ctx.now_ms()
        share = await add_share(
            ctx.spool, record.team_id, record.id, now_ms, now_ms + seconds * 1000
        )
        token = await sign_link(ctx.spool, _KIND, [share.id], share.expires_at_ms)
        return {
            "object": "email",
            "id": record.id,
            "url": ctx.config.api.public_url.rstrip("/") + PUBLIC_PREFIX + token,
            "expires_at": iso_timestamp(share.expires_at_ms),
        }

    @blueprint.delete("/emails/<id:email_id>/share")
    async def revoke(email_id: str) -> RevokedShares:
        record = email_store.get_email(ctx.spool, current_caller().team_id, email_id)
        revoked = await revoke_shares(ctx.spool, record.team_id, record.id)
        return {"object": "email", "id": record.id, "revoked": revoked}

    @blueprint.get(PUBLIC_PREFIX + "<token>")
    async def view(token: str) -> Response:
        now_ms = ctx.now_ms()
        fields = await open_link(ctx.spool, _KIND, token, now_ms)
        share = None
        if fields is not None and len(fields) == 1:
            share = open_share(ctx.spool, fields[0], now_ms)
        if share is None:
            raise ApiError(404, "not_found", "This link is not valid, has expired or was revoked.")
        record = email_store.get_email(ctx.spool, share.team_id, share.email_id)
        return Response(
            shared_page(record),
            content_type="text/html; charset=utf-8",
            headers={
                "Content-Security-Policy": PAGE_POLICY,
                "X-Content-Type-Options": "nosniff",
                "X-Frame-Options": "DENY",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "private, no-store",
                "Cross-Origin-Opener-Policy": "same-origin",
            },
        )

    return blueprint
