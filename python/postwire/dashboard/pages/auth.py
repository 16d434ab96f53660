"""Signing in and out, and switching teams: `/`, `/login`, `/logout`, `/team/switch`.

A failed login says the same, and costs the same work, whether the address is unknown or the
password wrong; past `auth.max_login_failures` failures in 15 minutes for the address typed or
from the client's address, attempts are refused before any password is checked.
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, Response, flash, g, render_template, request

from postwire.accounts import login_limits, passwords, sessions
from postwire.accounts import users as accounts_users
from postwire.dashboard.access import pending_mfa, public, requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import (
    LoginRefused,
    clear_session_cookie,
    finish_login,
    session_method_admitted,
)
from postwire.dashboard.next_url import safe_next
from postwire.dashboard.redirects import see_other

WRONG_CREDENTIALS: Final = "Wrong email or password."
TOO_MANY_ATTEMPTS: Final = "Too many failed attempts. Wait 15 minutes, then try again."


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("auth", __name__)

    @bp.get("/")
    @public
    async def home() -> Response:
        return see_other("/emails" if g.viewer is not None else "/login")

    @bp.get("/login")
    @public
    async def login_form() -> str | Response:
        next_url = safe_next(request.args.get("next"))
        if g.viewer is not None and not g.viewer.session.mfa_pending:
            return see_other(next_url)
        return await _render_login(ctx, next_url=next_url)

    @bp.post("/login")
    @public
    async def login() -> tuple[str, int] | Response:
        form = await request.form
        email = form.get("email", "").strip()
        password = form.get("password", "")
        next_url = safe_next(form.get("next"))
        address = request.remote_addr or ""
        now = ctx.now_seconds()
        limit = ctx.config.auth.max_login_failures
        if login_limits.login_blocked(ctx.spool, email, address, now, limit):
            return await _render_login(ctx, next_url, email, TOO_MANY_ATTEMPTS), 429
        user = accounts_users.find_user_by_email(ctx.spool, email) if email else None
        stored = user.password_hash if user is not None else None
        if user is None or not await passwords.verify_password(stored, password):
            await login_limits.record_failure(ctx.spool, email, address, now, limit)
            return await _render_login(ctx, next_url, email, WRONG_CREDENTIALS), 401
        if stored is not None and passwords.needs_rehash(stored):
            user = await accounts_users.set_password_hash(
                ctx.spool, user, await passwords.hash_password(password)
            )
        await login_limits.clear_account_failures(ctx.spool, email)
        try:
            return await finish_login(ctx, user, method="password", next_url=next_url)
        except LoginRefused as refused:
            return await _render_login(ctx, next_url, email, refused.message), 403

    @bp.post("/logout")
    @pending_mfa
    @requires("member")
    async def logout() -> Response:
        if g.session is not None:
            await sessions.end_session(ctx.spool, g.session)
        response = see_other("/login")
        clear_session_cookie(response)
        return response

    @bp.post("/team/switch")
    @requires("member")
    async def switch_team() -> Response:
        form = await request.form
        team_id = form.get("team_id", "")
        membership = accounts_users.get_membership(ctx.spool, g.viewer.user.id, team_id)
        if membership is None:
            await flash("You are not a member of that team.", "error")
        elif not session_method_admitted(ctx, membership, g.viewer.session.method):
            await flash(
                "That team requires single sign-on: sign out and sign in through its "
                "identity provider.",
                "error",
            )
        else:
            await sessions.switch_team(ctx.spool, g.viewer.session, team_id)
        # The page shown was of the other team: its ids mean nothing in this one.
        return see_other("/emails")

    return bp


async def _render_login(
    ctx: DashboardContext, next_url: str, email: str = "", error: str | None = None
) -> str:
    auth = ctx.config.auth
    return await render_template(
        "login.html",
        next_url=next_url,
        email=email,
        error=error,
        google=bool(auth.google_client_id),
        github=bool(auth.github_client_id),
        signup_open=auth.signup == "open",
    )
