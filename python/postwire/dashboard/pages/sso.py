"""Sign-in with Google, GitHub and a team's own identity provider (OpenID Connect or SAML 2.0),
and the team's SSO settings page (`sso_team.py`, nested here).

    GET  /login/google, /login/github       start an OAuth / OpenID Connect sign-in
    GET  /login/sso, POST /login/sso        ask the address, find the team whose SSO answers it
    GET  /login/sso/<team>                  start the team's sign-in (OIDC or SAML)
    GET  /auth/callback/<provider>          the provider's answer: google, github, oidc
    GET  /auth/saml/<team>/metadata         the team's service provider metadata
    POST /auth/saml/<team>/acs              the IdP's signed answer (cross-site: no CSRF token)
    GET  /auth/saml/<team>/done             the same browser picks the proven identity up
    POST /account/sso/<team>/link           a signed-in member links the team's provider to
                                            their account (its answer comes back as above)

Each sign-in is bound to the browser that started it by the `pw_sso` cookie (random; only its
SHA-256 is kept with the login), so a callback URL or a SAML answer carried to another browser
signs no one in there (login CSRF). A link is started only by a POST with the session's CSRF
token, and made only if the answer comes back to the same signed-in user.
"""

from __future__ import annotations

import secrets
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Final
from urllib.parse import urlencode

import trio
from quart import Blueprint, Response, g, render_template, request

from postwire.accounts import oauth, saml
from postwire.accounts.identity_linking import SignInRefused
from postwire.accounts.provider_http import ProviderError, ProviderHttp, open_provider_http
from postwire.accounts.saml import SamlError
from postwire.dashboard.access import changes_sign_in, public, requires, signed_post
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import LoginRefused
from postwire.dashboard.next_url import safe_next
from postwire.dashboard.pages import sso_link, sso_team
from postwire.dashboard.provider_sign_in import (
    BROWSER_COOKIE,
    LinkNotAllowed,
    StaleSignIn,
    keep_proven_identity,
    sign_in_with_identity,
    take_proven_identity,
)
from postwire.dashboard.redirects import see_other
from postwire.rate_limit import RateLimiter
from postwire.store.accounts import TEAMS
from postwire.store.sso import (
    PendingLoginRecord,
    get_sso_config,
    save_pending_login,
    secret_sha256,
    take_pending_login,
    team_for_email_domain,
)
from postwire.store.users import get_membership

# A proven SAML identity waits this long for its browser's next request.
PROVEN_TTL: Final = timedelta(minutes=2)
# Sign-ins a client address may start a minute: each keeps a record until it expires, so
# starts are limited to keep a flood from filling the spool.
STARTS_PER_MINUTE: Final = 30


class _Refused(Exception):
    """A sign-in that cannot go on; `message` is shown on the page."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("sso", __name__)
    blueprint.register_blueprint(sso_team.routes(ctx))
    blueprint.register_blueprint(sso_link.routes(ctx))
    public_url = ctx.config.dashboard.public_url.rstrip("/")
    allow_private = ctx.config.auth.allow_private_issuers

    starts = RateLimiter(STARTS_PER_MINUTE, window_seconds=60)

    async def too_many_starts() -> Response | None:
        decision = starts.check(request.remote_addr or "", ctx.monotonic())
        if decision is None or decision.allowed:
            return None
        return await _refusal(
            "Too many sign-ins were started from your address. Wait a minute and try again.",
            status=429,
        )

    def callback_url(provider: str) -> str:
        return f"{public_url}/auth/callback/{provider}"

    def provider_http(*, vet: bool) -> AbstractAsyncContextManager[ProviderHttp]:
        return open_provider_http(vet=vet and not allow_private)

    async def start(settings: oauth.ProviderSettings | None, link_user_id: str = "") -> Response:
        if settings is None:
            return await _refusal("This way of signing in is not set up here.", status=404)
        if refused := await too_many_starts():
            return refused
        browser = request.cookies.get(BROWSER_COOKIE) or secrets.token_urlsafe(32)
        try:
            async with provider_http(vet=settings.tenant_chosen) as http:
                url = await oauth.begin_provider_login(
                    ctx.spool,
                    http,
                    settings,
                    redirect_uri=callback_url(settings.provider),
                    next_url=safe_next(request.args.get("next")),
                    browser_secret=browser,
                    now=ctx.now(),
                    allow_private=allow_private,
                    link_user_id=link_user_id,
                )
        except ProviderError as error:
            return await _refusal(str(error), status=502)
        return _with_browser_cookie(see_other(url), browser)

    @blueprint.get("/login/google")
    @public
    async def login_google() -> Response:
        return await start(oauth.google_settings(ctx.config.auth))

    @blueprint.get("/login/github")
    @public
    async def login_github() -> Response:
        return await start(oauth.github_settings(ctx.config.auth))

    @blueprint.get("/login/sso")
    @public
    async def login_sso_form() -> str:
        return await render_template(
            "sso_login.html", next_url=safe_next(request.args.get("next")), email="", error=None
        )

    @blueprint.post("/login/sso")
    @public
    async def login_sso_find() -> str | Response:
        form = await request.form
        entered = form.get("email", "").strip()
        next_url = safe_next(form.get("next"))
        # An address finds the team by its domain; anything else is taken as a team ID.
        if "@" in entered:
            team_id = team_for_email_domain(ctx.spool, entered.rpartition("@")[2].lower())
        else:
            team_id = entered if TEAMS.get(ctx.spool, entered) is not None else None
        config = None if team_id is None else get_sso_config(ctx.spool, team_id)
        if team_id is None or config is None or not config.protocol:
            return await render_template(
                "sso_login.html",
                next_url=next_url,
                email=entered,
                error="No team signs in with SSO for this address or team ID. Use your"
                " password, or ask your team's owner for the team's sign-in link.",
            )
        # A link, not a redirect: the page's CSP keeps forms on this origin (form-action),
        # and the identity provider is elsewhere.
        team = TEAMS.get(ctx.spool, team_id)
        return await render_template(
            "sso_continue.html",
            team_name=team.name if team is not None else "your team",
            start_url=f"/login/sso/{team_id}?{urlencode({'next': next_url})}",
        )

    @blueprint.get("/login/sso/<team_id>")
    @public
    async def login_sso_team(team_id: str) -> Response:
        return await start_team(team_id)

    @blueprint.post("/account/sso/<team_id>/link")
    @changes_sign_in
    @requires("member")
    async def link_sso(team_id: str) -> Response:
        viewer = g.viewer
        if get_membership(ctx.spool, viewer.user.id, team_id) is None:
            return await _refusal("You are not a member of this team.", status=404)
        started = await start_team(team_id, viewer.user.id)
        location = started.headers.get("Location")
        if started.status_code != 303 or location is None:
            return started
        # A link to follow, not a redirect: the CSP's form-action keeps this form's POST (and
        # its redirects) on this origin.
        team = TEAMS.get(ctx.spool, team_id)
        page = await render_template(
            "sso_continue.html",
            team_name=team.name if team is not None else "This team",
            start_url=location,
            linking=True,
        )
        response = Response(page, mimetype="text/html")
        for cookie in started.headers.getlist("Set-Cookie"):
            response.headers.add("Set-Cookie", cookie)
        return response

    async def start_team(team_id: str, link_user_id: str = "") -> Response:
        config = get_sso_config(ctx.spool, team_id)
        if config is None or not config.protocol:
            return await _refusal("This team has no single sign-on set up.", status=404)
        if config.protocol == "oidc":
            return await start(oauth.team_oidc_settings(config), link_user_id)
        return await start_saml(team_id, config.saml_metadata_xml, link_user_id)

    async def start_saml(team_id: str, metadata_xml: str, link_user_id: str) -> Response:
        if refused := await too_many_starts():
            return refused
        browser = request.cookies.get(BROWSER_COOKIE) or secrets.token_urlsafe(32)
        now = ctx.now()
        try:
            request_id, url = await trio.to_thread.run_sync(
                saml.authn_request, public_url, team_id, metadata_xml, ""
            )
        except SamlError as error:
            return await _refusal(str(error), status=502)
        record = PendingLoginRecord(
            provider="saml",
            team_id=team_id,
            nonce="",
            code_verifier="",
            next_url=safe_next(request.args.get("next")),
            browser_sha256=secret_sha256(browser),
            redirect_uri=saml.service_provider_urls(public_url, team_id)[1],
            created_at=now.isoformat(),
            expires_at=(now + oauth.LOGIN_TTL).isoformat(),
            link_user_id=link_user_id,
        )
        await save_pending_login(ctx.spool, request_id, record, now=now.isoformat())
        return _with_browser_cookie(see_other(url), browser)

    @blueprint.get("/auth/callback/<provider>")
    @public
    async def callback(provider: str) -> Response:
        if provider not in ("google", "github", "oidc"):
            return await _refusal("Unknown sign-in provider.", status=404)
        args = request.args
        if "error" in args:
            return await _refusal(
                f"The identity provider did not sign you in ({args.get('error', '')[:100]})."
            )
        try:
            login = await oauth.take_login(
                ctx.spool,
                state=args.get("state", ""),
                provider=provider,
                browser_secret=request.cookies.get(BROWSER_COOKIE),
                now=ctx.now(),
            )
            settings = _settings_for(ctx, login)
            async with provider_http(vet=settings.tenant_chosen) as http:
                identity = await oauth.complete_provider_login(
                    http,
                    settings,
                    login,
                    code=args.get("code", ""),
                    now=ctx.now(),
                    allow_private=allow_private,
                )
            return await sign_in_with_identity(
                ctx,
                identity,
                login.provider,
                login.team_id,
                next_url=login.next_url,
                link_user_id=login.link_user_id,
                browser_sha256=login.browser_sha256,
            )
        except (ProviderError, _Refused, SignInRefused, LoginRefused, LinkNotAllowed) as error:
            return await _refusal(_message(error))

    @blueprint.get("/auth/saml/<team_id>/metadata")
    @public
    async def saml_metadata(team_id: str) -> Response:
        if TEAMS.get(ctx.spool, team_id) is None:
            return await _refusal("Unknown team.", status=404)
        document = await trio.to_thread.run_sync(saml.sp_metadata, public_url, team_id)
        return Response(document, mimetype="application/samlmetadata+xml")

    @blueprint.post("/auth/saml/<team_id>/acs")
    @public
    @signed_post
    async def saml_acs(team_id: str) -> Response:
        form = await request.form
        answer = form.get("SAMLResponse", "")
        login_id = saml.in_response_to(answer) or ""
        login = await take_pending_login(ctx.spool, login_id) if login_id else None
        if login is None or login.provider != "saml" or login.team_id != team_id:
            return await _refusal(
                "This SAML answer matches no sign-in started here, or was used already."
                " Start again from the login page."
            )
        config = get_sso_config(ctx.spool, team_id)
        if config is None or config.protocol != "saml":
            return await _refusal("This team has no SAML sign-in set up.")
        try:
            if ctx.now().isoformat() >= login.expires_at:
                raise SamlError("This sign-in took too long and expired. Start again.")
            identity = await trio.to_thread.run_sync(
                saml.verify_response,
                public_url,
                team_id,
                config.saml_metadata_xml,
                answer,
                login_id,
            )
        except SamlError as error:
            return await _refusal(str(error))
        ticket = secrets.token_urlsafe(32)
        await keep_proven_identity(
            ctx,
            ticket,
            team_id,
            identity,
            next_url=login.next_url,
            browser_sha256=login.browser_sha256,
            ttl=PROVEN_TTL,
            link_user_id=login.link_user_id,
        )
        # A top-level GET next: the browser's SameSite=Lax cookie comes with it.
        return see_other(f"/auth/saml/{team_id}/done?ticket={ticket}")

    @blueprint.get("/auth/saml/<team_id>/done")
    @public
    async def saml_done(team_id: str) -> Response:
        try:
            proven, identity = await take_proven_identity(
                ctx, request.args.get("ticket", ""), team_id
            )
        except StaleSignIn as stale:
            return await _refusal(str(stale))
        try:
            return await sign_in_with_identity(
                ctx,
                identity,
                "saml",
                team_id,
                next_url=proven.next_url,
                link_user_id=proven.link_user_id,
                browser_sha256=proven.browser_sha256,
            )
        except (SignInRefused, LoginRefused, LinkNotAllowed) as error:
            return await _refusal(_message(error))

    return blueprint


def _settings_for(ctx: DashboardContext, login: PendingLoginRecord) -> oauth.ProviderSettings:
    """The provider of a taken login, as configured now (a team may have changed it since)."""
    auth = ctx.config.auth
    settings = None
    if login.provider == "google":
        settings = oauth.google_settings(auth)
    elif login.provider == "github":
        settings = oauth.github_settings(auth)
    elif login.team_id is not None:
        config = get_sso_config(ctx.spool, login.team_id)
        settings = None if config is None else oauth.team_oidc_settings(config)
    if settings is None:
        raise _Refused("This way of signing in is no longer set up here.")
    return settings


def _with_browser_cookie(response: Response, browser: str) -> Response:
    response.set_cookie(
        BROWSER_COOKIE,
        browser,
        max_age=int(oauth.LOGIN_TTL.total_seconds()),
        path="/",
        secure=True,
        httponly=True,
        samesite="Lax",
    )
    return response


def _message(error: Exception) -> str:
    return getattr(error, "message", None) or str(error)


async def _refusal(message: str, *, status: int = 400) -> Response:
    page = await render_template("error.html", title="Sign-in did not complete", message=message)
    return Response(page, status=status, mimetype="text/html")
