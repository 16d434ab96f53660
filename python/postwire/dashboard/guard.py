"""The request guard: the one place where the dashboard decides who may see what.

For every request it loads the session of the `pw_session` cookie and sets `g.viewer`, checks
the CSRF token of every unsafe method, then applies the view's marks (`access.py`): signed-out
visitors go to /login?next=..., a session whose second factor is pending reaches only the MFA
challenge, a team's MFA and SSO policies hold, and the role suffices. Handlers never check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import Forbidden

from postwire.accounts import sessions
from postwire.accounts import users as accounts_users
from postwire.accounts.sso import password_login_refused_parked
from postwire.dashboard.access import access_of
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.csrf import ANONYMOUS_COOKIE, FIELD, HEADER, UNSAFE_METHODS, check_token
from postwire.dashboard.redirects import see_other
from postwire.dashboard.viewer import Viewer
from postwire.store.mfa_devices import user_has_mfa_parked
from postwire.store.sessions import SessionRecord
from postwire.store.users import role_at_least

SESSION_COOKIE: Final = "pw_session"
# Methods that only read: a member may use them; anything else needs an admin by default.
READ_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
# Endpoints outside any page module: the hashed static files.
UNGUARDED_ENDPOINTS: Final = frozenset({"static_asset"})
MFA_CHALLENGE_PATH: Final = "/login/mfa"
MFA_ENROLMENT_PATH: Final = "/account/mfa"
# Sessions whose last_seen_at is being written; forgotten past this many (at worst one write
# more each).
MAX_TOUCHES_NOTED: Final = 10_000


class SignInChangeRefused(Forbidden):
    description = (
        "You signed in through a team's single sign-on, which speaks for that team only. To"
        " change how your account signs in, sign in with your password, Google, GitHub or a"
        " passkey."
    )


class RoleRefused(Forbidden):
    description = "Your role in this team does not allow this. Ask an owner or an admin."


class SsoRequired(Forbidden):
    description = (
        "This team requires single sign-on. Sign out, then sign in through your "
        "organization's identity provider."
    )


@dataclass(slots=True)
class _Found:
    session: SessionRecord | None = None
    viewer: Viewer | None = None


def install_guard(app: QuartTrio, ctx: DashboardContext) -> None:
    @app.before_request
    async def guard() -> Response | None:
        g.viewer = None
        g.session = None
        endpoint = request.endpoint
        if endpoint is None or endpoint in UNGUARDED_ENDPOINTS:
            return None  # a 404 or 405, or a static file
        access = access_of(app.view_functions[endpoint])
        found = await _load_viewer(ctx, app)
        g.session, g.viewer = found.session, found.viewer
        viewer = found.viewer
        if viewer is None and not access.public:
            # Before the CSRF check: a form posted after its session timed out leads to the
            # login page, not to a refusal; nothing is done either way.
            return _to_login()
        if request.method in UNSAFE_METHODS and not access.signed_post:
            await _check_csrf(found.session)
        if viewer is None or access.public:
            return None
        if viewer.session.mfa_pending:
            return None if access.pending_mfa else see_other(MFA_CHALLENGE_PATH)
        if access.pending_mfa:
            return None  # sign out and the challenge stay reachable whatever the policy
        sso_of_this_team = viewer.session.sso_team_id == viewer.team.id
        if not sso_of_this_team and await password_login_refused_parked(
            ctx.spool, viewer.team.id, viewer.role
        ):
            raise SsoRequired
        if access.changes_sign_in and viewer.session.sso_team_id:
            raise SignInChangeRefused
        if (
            viewer.policy.require_mfa
            and not access.mfa_setup
            # The team's own identity provider is where its second factors are asked.
            and not sso_of_this_team
            and not await user_has_mfa_parked(ctx.spool, viewer.user.id)
        ):
            return see_other(MFA_ENROLMENT_PATH)
        needed = access.role or ("member" if request.method in READ_METHODS else "admin")
        if not role_at_least(viewer.role, needed):
            raise RoleRefused
        return None


async def _load_viewer(ctx: DashboardContext, app: QuartTrio) -> _Found:
    now = ctx.now_seconds()
    session = await sessions.load_session_parked(
        ctx.spool, request.cookies.get(SESSION_COOKIE), now, ctx.session_limits
    )
    if session is None:
        return _Found()
    user = await accounts_users.get_user_parked(ctx.spool, session.user_id)
    if user is None:
        return _Found()
    teams = tuple(await accounts_users.memberships_of_parked(ctx.spool, user))
    if session.sso_team_id:
        # Started through a team's identity provider: that team alone, whatever else the
        # account is a member of.
        teams = tuple(pair for pair in teams if pair[1].id == session.sso_team_id)
    current = next((pair for pair in teams if pair[1].id == session.team_id), None)
    if current is None:
        if not teams:  # removed from every team: the session shows nothing
            return _Found(session=session)
        # Removed from the team the session showed: show the first team left.
        current = teams[0]
        session = await sessions.switch_team(ctx.spool, session, current[1].id)
    if sessions.needs_touch(session, now) and ctx.touching.get(session.id) != session.last_seen_at:
        # Off the request's path: the page does not wait for this commit. Noted so that the
        # requests arriving before it lands do not each start another.
        if len(ctx.touching) >= MAX_TOUCHES_NOTED:
            ctx.touching.clear()
        ctx.touching[session.id] = session.last_seen_at
        app.nursery.start_soon(sessions.touch_session, ctx.spool, session, now)
    membership, team = current
    viewer = Viewer(
        user=user,
        team=team,
        role=membership.role,
        session=session,
        teams=teams,
        policy=await accounts_users.team_policy_parked(ctx.spool, team.id),
    )
    return _Found(session=session, viewer=viewer)


async def _check_csrf(session: SessionRecord | None) -> None:
    presented = request.headers.get(HEADER)
    if presented is None:
        form = await request.form
        presented = form.get(FIELD)
    expected = session.csrf_token if session is not None else request.cookies.get(ANONYMOUS_COOKIE)
    check_token(presented, expected)


def _to_login() -> Response:
    path = request.full_path.rstrip("?") if request.method in READ_METHODS else "/emails"
    return see_other(f"/login?next={quote(path, safe='/')}")
