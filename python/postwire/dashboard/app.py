"""The dashboard: a Quart-Trio app of server-rendered pages, one blueprint per page module.

Every request passes the guard (`guard.py`) before its view; every response gets the security
headers below. Templates extend `base.html`; static files are served under content-hashed names
(`assets.py`), so no inline script or style is ever needed and the CSP forbids them.
"""

from __future__ import annotations

import importlib
import logging
from typing import Final

from markupsafe import Markup
from quart import Response, g, render_template, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, NotFound

from postwire.accounts.passwords import PasswordWorkBusy
from postwire.dashboard.assets import Assets
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.csrf import ANONYMOUS_COOKIE, CsrfRefused, hidden_field, new_anonymous_token
from postwire.dashboard.guard import install_guard
from postwire.dashboard.pages import contact_imports
from postwire.dashboard.viewer import Viewer
from postwire.errors import StoreUnavailableError
from postwire.http_routing import route_without_redirects
from postwire.http_serving import drain_request_body
from postwire.store.domain_health import DomainHealthRecord, unhealthy_domains
from postwire.store.mfa_devices import user_has_mfa_parked
from postwire.store.outages import Outage
from postwire.store.server_secrets import server_secret
from postwire.store.spool import Spool

log = logging.getLogger("postwire.dashboard")

# The modules under postwire.dashboard.pages; each has `routes(ctx) -> Blueprint`.
PAGE_MODULES: Final = (
    "auth",
    "emails",
    "email_schedule",
    "broadcasts",
    "broadcast_editor",
    "brand",
    "email_templates",
    "contacts",
    "contact_imports",
    "audience",
    "metrics",
    "domains",
    "api_keys",
    "smtp_settings",
    "webhooks",
    "suppressions",
    "team",
    "account",
    "mfa",
    "sso",
)

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
STATIC_CACHE: Final = "public, max-age=31536000, immutable"
# Quart's signed cookie session carries only flash messages: the session proper is server-side.
FLASH_COOKIE: Final = "pw_flash"


def create_dashboard(ctx: DashboardContext) -> QuartTrio:
    app = QuartTrio(__name__, template_folder="templates", static_folder=None)
    route_without_redirects(app)
    app.request_class = contact_imports.UploadCappedRequest  # CSV uploads: the API's cap
    app.config.update(
        SESSION_COOKIE_NAME=FLASH_COOKIE,
        SESSION_COOKIE_SECURE=True,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        MAX_CONTENT_LENGTH=16 * 1024 * 1024,
        PROVIDE_AUTOMATIC_OPTIONS=False,
    )
    assets = Assets()
    app.jinja_env.globals.update(asset_url=assets.url, csrf_field=csrf_field, csrf_token=csrf_token)

    @app.before_serving
    async def load_secret() -> None:
        app.secret_key = await server_secret(ctx.spool, "dashboard_flash")

    @app.context_processor
    async def inject_viewer() -> dict[str, object]:
        return {
            "viewer": g.get("viewer"),
            "domain_alerts": g.get("domain_alerts", []),
            "sandbox": ctx.config.sandbox,  # the banner of every page (`base.html`)
        }

    @app.get("/static/<path:name>")
    async def static_asset(name: str) -> Response:
        asset = assets.find(name)
        if asset is None:
            raise NotFound
        response = Response(asset.content, mimetype=asset.mimetype)
        response.headers["Cache-Control"] = STATIC_CACHE
        return response

    install_guard(app, ctx)

    @app.before_request
    async def find_domain_alerts() -> None:
        # After the guard, which answers first for a request it stops: the banner of the
        # team's sending domains past a complaint or bounce threshold (`base.html`).
        g.domain_alerts = await _domain_alerts(ctx.spool, g.get("viewer"))

    _install_error_pages(app)

    @app.after_request
    async def add_security_headers(response: Response) -> Response:
        headers = response.headers
        if "Content-Security-Policy" not in headers:
            # A view that sets its own policy (the email preview, framed by its page) says
            # with frame-ancestors who may frame it; every other response: nobody.
            headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
            headers["X-Frame-Options"] = "DENY"
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Referrer-Policy"] = "same-origin"
        headers.setdefault("Cache-Control", "no-store")
        if request.method not in ("GET", "HEAD"):
            # Answers decided without the body (sign in first, refused, not found) included.
            await drain_request_body(response)
        new_token = g.get("new_anonymous_csrf")
        if new_token is not None:
            response.set_cookie(
                ANONYMOUS_COOKIE, new_token, path="/", secure=True, httponly=True, samesite="Lax"
            )
        return response

    for name in PAGE_MODULES:
        module = importlib.import_module(f"postwire.dashboard.pages.{name}")
        app.register_blueprint(module.routes(ctx))
    return app


def csrf_token() -> str:
    """The token this browser's forms carry: its session's, or (signed out) its own cookie's."""
    session = g.get("session")
    if session is not None:
        token: str = session.csrf_token
        return token
    token = request.cookies.get(ANONYMOUS_COOKIE) or g.get("new_anonymous_csrf") or ""
    if not token:
        token = new_anonymous_token()
        g.new_anonymous_csrf = token
    return token


def csrf_field() -> Markup:
    return hidden_field(csrf_token())


async def _domain_alerts(spool: Spool, viewer: Viewer | None) -> list[DomainHealthRecord]:
    """The team's unhealthy domains, for a viewer past every step of signing in only."""
    if viewer is None or viewer.session.mfa_pending:
        return []
    if viewer.policy.require_mfa and not await user_has_mfa_parked(spool, viewer.user.id):
        return []
    return await unhealthy_domains(spool, viewer.team.id)


# Said once a minute at most while the database is unreachable.
REFUSING = Outage("the dashboard (answering 503)")


def _install_error_pages(app: QuartTrio) -> None:
    @app.errorhandler(CsrfRefused)
    async def csrf_refused(_: CsrfRefused) -> tuple[str, int]:
        message = (
            "This form was refused because it did not come from this page as it was last "
            "shown (it may have expired, or come from another site). Go back, reload the "
            "page and try again."
        )
        return await render_template("error.html", title="Form refused", message=message), 403

    @app.errorhandler(PasswordWorkBusy)
    async def password_work_busy(_: PasswordWorkBusy) -> Response:
        # A password change, reset or new member's password met a full queue of checks.
        message = "Too many passwords are being checked right now. Try again in a moment."
        page = await render_template("error.html", title="Busy", message=message)
        return Response(page, status=503, headers={"Retry-After": "2"}, mimetype="text/html")

    @app.errorhandler(StoreUnavailableError)
    async def store_unavailable(error: StoreUnavailableError) -> Response:
        REFUSING.failed(error)
        message = (
            "Postwire cannot reach its database right now, so this page could not be shown "
            "and nothing was changed. Try again in a moment."
        )
        page = await render_template("error.html", title="Database unreachable", message=message)
        return Response(page, status=503, headers={"Retry-After": "5"}, mimetype="text/html")

    @app.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> tuple[str, int]:
        code = error.code or 500
        title = {404: "Not found", 403: "Not allowed", 405: "Not allowed"}.get(
            code, error.name or "Error"
        )
        message = error.description if code != 404 else "There is nothing at this address."
        return await render_template("error.html", title=title, message=message), code

    @app.errorhandler(Exception)
    async def unexpected_error(error: Exception) -> tuple[str, int]:
        log.exception("dashboard error on %s %s", request.method, request.path, exc_info=error)
        message = "Something went wrong on our side. The error was logged; please try again."
        return await render_template("error.html", title="Error", message=message), 500
