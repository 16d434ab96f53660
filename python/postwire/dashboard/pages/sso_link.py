"""Linking a team's identity provider to an existing account by that account's password, at
the sign-in that found the account unlinked:

    POST /login/sso/<team>/link/<ticket>  the account's password: links, then signs in to the team

The ticket names the identity the team's provider proved a moment ago (kept for
`LINK_BY_PASSWORD_TTL`, used once, in the browser that signed in there). The password is
checked under the sign-in limits, as at the login page; the second factor, if the account has
one, is asked next, as after any sign-in.
"""

from __future__ import annotations

from quart import Blueprint, Response, render_template, request

from postwire.accounts import login_limits
from postwire.accounts import users as accounts_users
from postwire.accounts.identity_linking import SignInRefused, link_proven_by_owner
from postwire.dashboard.access import public
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import LoginRefused, finish_login
from postwire.dashboard.provider_sign_in import (
    BROWSER_COOKIE,
    StaleSignIn,
    link_ticket_key,
    take_proven_identity,
)


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("sso_link", __name__)

    @blueprint.post("/login/sso/<team_id>/link/<ticket>")
    @public
    async def link_by_password(team_id: str, ticket: str) -> Response:
        form = await request.form
        try:
            proven, identity = await take_proven_identity(ctx, link_ticket_key(ticket), team_id)
        except StaleSignIn as stale:
            return await _refused(str(stale))
        user = accounts_users.find_user_by_email(ctx.spool, proven.email)
        if user is None or user.password_hash is None:
            return await _refused(
                "This account has no password yet: choose “Forgot password” on the login page"
                " to set one, then sign in through your team again."
            )
        address = request.remote_addr or ""
        password = form.get("password", "")
        if not await login_limits.check_current_password(
            ctx.spool, ctx.config.auth, user, password, address, ctx.now_seconds()
        ):
            return await _refused(
                "The password is not right (or there were too many attempts). Nothing was"
                " linked. Start again from your team's sign-in."
            )
        try:
            user = await link_proven_by_owner(
                ctx.spool, identity, proven.team_id, user, now=ctx.now()
            )
            response = await finish_login(
                ctx,
                user,
                method="sso",
                next_url=proven.next_url,
                team_id=proven.team_id,
                sso_team_id=proven.team_id,
            )
        except (SignInRefused, LoginRefused) as error:
            return await _refused(str(error))
        response.delete_cookie(BROWSER_COOKIE, path="/", secure=True, httponly=True, samesite="Lax")
        return response

    return blueprint


async def _refused(message: str) -> Response:
    page = await render_template("error.html", title="Sign-in did not complete", message=message)
    return Response(page, status=400, mimetype="text/html")
