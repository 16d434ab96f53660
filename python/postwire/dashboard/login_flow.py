"""The end of every way in (password, Google, GitHub, SSO, passkey): choose the team, make a
fresh session (ending the browser's previous one), hold it at the second factor when the user
has one, set the cookie and redirect."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from quart import Response, g, request

from postwire.accounts import sessions
from postwire.accounts import users as accounts_users
from postwire.accounts.mfa import user_has_mfa
from postwire.accounts.sso import password_login_refused
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.guard import MFA_CHALLENGE_PATH, SESSION_COOKIE
from postwire.dashboard.next_url import safe_next
from postwire.dashboard.redirects import see_other
from postwire.store.accounts import TeamRecord
from postwire.store.sessions import SessionRecord
from postwire.store.users import MembershipRecord, UserRecord

# Ways in that are themselves a second factor: no MFA challenge after them.
MULTI_FACTOR_METHODS: Final = frozenset({"passkey"})


class LoginRefused(Exception):
    """The person proved who they are, but may not sign in; `message` says why, plainly."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def choose_team(
    ctx: DashboardContext,
    user: UserRecord,
    method: str,
    team_id: str | None,
    sso_team_id: str = "",
) -> TeamRecord:
    """The team a new session shows: `team_id` if given, else the first team (by name) whose
    policy admits `method`. Owners pass an SSO-only team's policy with any method (break-glass
    access when the identity provider is down). A session started through a team's SSO
    (`sso_team_id`) shows that team alone."""
    teams = accounts_users.memberships_of(ctx.spool, user)
    if not teams:
        raise LoginRefused("Your account is not a member of any team. Ask for an invitation.")
    admitted = [(m, t) for m, t in teams if _admits(ctx, m, sso_team_id)]
    if team_id is not None:
        admitted = [(m, t) for m, t in admitted if t.id == team_id]
    if not admitted:
        raise LoginRefused(
            "Your team requires single sign-on. Sign in through your organization's identity "
            "provider."
        )
    return admitted[0][1]


def _admits(ctx: DashboardContext, membership: MembershipRecord, sso_team_id: str) -> bool:
    # A team's provider vouches for that team's membership alone; any other way in passes a
    # team's policy unless it enforces SSO (owners excepted).
    if sso_team_id:
        return membership.team_id == sso_team_id
    return not password_login_refused(ctx.spool, membership.team_id, membership.role)


def session_admits_team(
    ctx: DashboardContext, membership: MembershipRecord, session: SessionRecord
) -> bool:
    """Whether `session` may show the membership's team."""
    return _admits(ctx, membership, session.sso_team_id)


async def finish_login(
    ctx: DashboardContext,
    user: UserRecord,
    *,
    method: str,
    next_url: str | None,
    team_id: str | None = None,
    sso_team_id: str = "",
) -> Response:
    """Sign `user` in after `method` proved who they are (`sso_team_id`: the team whose
    provider did); raises LoginRefused (the caller shows its message) when no team of theirs
    admits the method."""
    team = choose_team(ctx, user, method, team_id, sso_team_id)
    mfa_pending = method not in MULTI_FACTOR_METHODS and user_has_mfa(ctx.spool, user.id)
    token, _ = await sessions.start_session(
        ctx.spool,
        user,
        team.id,
        mfa_pending=mfa_pending,
        method=method,
        now=ctx.now_seconds(),
        address=request.remote_addr or "",
        user_agent=request.headers.get("User-Agent", ""),
        replaces=g.get("session"),
        limits=ctx.session_limits,
        sso_team_id=sso_team_id,
    )
    target = safe_next(next_url)
    if mfa_pending:
        target = f"{MFA_CHALLENGE_PATH}?next={quote(target, safe='/')}"
    response = see_other(target)
    set_session_cookie(ctx, response, token)
    return response


async def finish_mfa(ctx: DashboardContext, next_url: str | None) -> Response:
    """The pending session's second factor passed: swap it for a full one (a new token) and
    go on to `next_url`. Called by the MFA challenge once it checked the code or passkey."""
    pending = g.get("session")
    if pending is None or not pending.mfa_pending:
        return see_other(safe_next(next_url))
    token, _ = await sessions.complete_mfa(ctx.spool, pending, ctx.now_seconds())
    response = see_other(safe_next(next_url))
    set_session_cookie(ctx, response, token)
    return response


def set_session_cookie(ctx: DashboardContext, response: Response, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=ctx.config.dashboard.session_max_hours * 3600,
        path="/",
        secure=True,
        httponly=True,
        samesite="Lax",
    )


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="Lax")
