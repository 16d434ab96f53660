"""Redirects typed as Quart responses (Quart's `redirect` is typed as Werkzeug's)."""

from __future__ import annotations

from quart import Response


def see_other(location: str) -> Response:
    """A 303: after a form's POST the browser GETs `location` (post/redirect/get)."""
    return Response("", status=303, headers={"Location": location})
