"""Routing that never redirects, for the REST API and the dashboard.

Werkzeug's router answers a path that differs from a rule only by slashes (`/emails/` for a
rule `/emails`, `//emails`, a rule's default value spelled out) with a 308 whose `Location` is
an absolute URL built from the request's `Host` header and scheme. Behind a proxy that ends TLS
that URL is `http://`: an SDK following it sends its API key in clear text, and others (PHP,
Java) fail on the redirect; the host is whatever the client claimed. So a trailing slash is
taken off the path before routing (every route answers with and without it) and the router is
told never to redirect. Postwire's absolute URLs come from `api.public_url` and
`dashboard.public_url`, never from request headers.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope
from quart import Quart

AsgiApp = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Coroutine[Any, Any, None]]


def route_without_redirects(app: Quart) -> None:
    """Set up `app`'s routing; before any route is added (rules take the map's settings when
    they are added)."""
    app.url_map.strict_slashes = False
    app.url_map.merge_slashes = False
    app.url_map.redirect_defaults = False
    app.asgi_app = _without_trailing_slash(app.asgi_app)  # type: ignore[method-assign, assignment]


def _without_trailing_slash(asgi_app: AsgiApp) -> AsgiApp:
    async def routed(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "http" and len(scope["path"]) > 1 and scope["path"].endswith("/"):
            path = scope["path"].rstrip("/") or "/"
            raw_path = scope.get("raw_path")
            scope = {**scope, "path": path}
            if raw_path:
                scope["raw_path"] = raw_path.rstrip(b"/") or b"/"
        await asgi_app(scope, receive, send)

    return routed
