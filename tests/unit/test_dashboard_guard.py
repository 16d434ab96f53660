"""The dashboard's request guard, login and sign-up through Quart's test client on a real
spool: CSRF, security headers, session rotation at login, `next`, roles, the MFA step and
team policy, team switching. (tests/dashboard/ drives the same through chromium.)"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio
from quart import Blueprint
from quart.typing import TestClientProtocol as ClientProtocol

from postwire import _core
from postwire.accounts import passwords, sessions, users
from postwire.config import load_config
from postwire.dashboard.access import mfa_setup, pending_mfa, public, requires
from postwire.dashboard.app import CONTENT_SECURITY_POLICY, create_dashboard
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.guard import SESSION_COOKIE
from postwire.store import accounts
from postwire.store.accounts import TeamRecord
from postwire.store.sessions import SessionRecord
from postwire.store.spool import TABLES, Spool
from postwire.store.users import Role, TeamPolicyRecord, UserRecord

PASSWORD = "correct horse battery"
START = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Dashboard:
    client: ClientProtocol
    ctx: DashboardContext
    clock: Clock
    team: TeamRecord
    owner: UserRecord

    async def csrf(self, path: str = "/login") -> str:
        """The CSRF token a page's form carries."""
        response = await self.client.get(path)
        match = re.search(r'name="csrf_token" value="([^"]+)"', await response.get_data(True))
        assert match, await response.get_data(True)
        return match.group(1)

    async def log_in(self, email: str = "owner@example.com", next_url: str = "") -> str:
        token = await self.csrf()
        form = {"email": email, "password": PASSWORD, "csrf_token": token, "next": next_url}
        response = await self.client.post("/login", form=form)
        assert response.status_code == 303, await response.get_data(True)
        return response.headers["Location"]

    def session_token(self) -> str | None:
        jar = self.client.cookie_jar
        assert jar is not None
        return next((c.value for c in jar if c.name == SESSION_COOKIE), None)

    async def current_session(self) -> SessionRecord:
        token = self.session_token()
        session = sessions.load_session(
            self.ctx.spool, token, self.ctx.now_seconds(), self.ctx.session_limits
        )
        assert session is not None
        return session


def probe_routes() -> Blueprint:
    """Views with each access mark, to test the guard alone."""
    bp = Blueprint("probe", __name__)

    @bp.get("/probe")
    async def read() -> str:
        return "read"

    @bp.post("/probe")
    async def write() -> str:
        return "written"

    @bp.post("/probe/member")
    @requires("member")
    async def member_write() -> str:
        return "member wrote"

    @bp.get("/probe/owner")
    @requires("owner")
    async def owner_read() -> str:
        return "owner read"

    @bp.get("/probe/public")
    @public
    async def public_read() -> str:
        return "public"

    @bp.get("/login/mfa")
    @pending_mfa
    async def challenge() -> str:
        return "challenge"

    @bp.get("/account/mfa")
    @mfa_setup
    async def enrol() -> str:
        return "enrol"

    return bp


@pytest.fixture
async def dashboard(tmp_path: Path) -> AsyncIterator[Dashboard]:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    config = dataclasses.replace(
        config, auth=dataclasses.replace(config.auth, max_login_failures=3, signup="open")
    )
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    clock = Clock()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        team = await accounts.create_team(spool, "Acme", START)
        owner = await users.create_user(
            spool,
            email="owner@example.com",
            name="Owner",
            now=START,
            password_hash=passwords.hash_password_sync(PASSWORD),
        )
        await users.add_membership(spool, owner.id, team.id, "owner", START)
        ctx = DashboardContext(config=config, spool=spool, now=clock)
        app = create_dashboard(ctx)
        app.register_blueprint(probe_routes())
        async with app.test_app() as test_app:
            yield Dashboard(test_app.test_client(), ctx, clock, team, owner)
        nursery.cancel_scope.cancel()
    await spool.close()


async def add_user(dashboard: Dashboard, email: str, role: Role) -> UserRecord:
    user = await users.create_user(
        dashboard.ctx.spool,
        email=email,
        name=email,
        now=START,
        password_hash=passwords.hash_password_sync(PASSWORD),
    )
    await users.add_membership(dashboard.ctx.spool, user.id, dashboard.team.id, role, START)
    return user


async def test_signed_out_visitors_go_to_login_with_next(dashboard: Dashboard) -> None:
    response = await dashboard.client.get("/")
    assert (response.status_code, response.headers["Location"]) == (303, "/login")
    response = await dashboard.client.get("/probe?x=1")
    assert response.headers["Location"] == "/login?next=/probe%3Fx%3D1"
    assert (await dashboard.client.get("/probe/public")).status_code == 200


async def test_every_page_carries_the_security_headers(dashboard: Dashboard) -> None:
    for path in ("/login", "/nowhere"):
        response = await dashboard.client.get(path)
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
        assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert response.headers["Cache-Control"] == "no-store"
    body = await (await dashboard.client.get("/login")).get_data(True)
    assert "<script>" not in body and "style=" not in body
    css = re.search(r'href="(/static/dashboard\.[0-9a-f]{12}\.css)"', body)
    assert css, body
    static = await dashboard.client.get(css.group(1))
    assert static.status_code == 200
    assert static.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert (await dashboard.client.get("/static/dashboard.css")).status_code == 404


async def test_login_sets_a_fresh_http_only_secure_cookie_and_follows_next(
    dashboard: Dashboard,
) -> None:
    token = await dashboard.csrf()
    response = await dashboard.client.post(
        "/login",
        form={
            "email": "OWNER@example.com",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "/domains?x=1",
        },
    )
    assert (response.status_code, response.headers["Location"]) == (303, "/domains?x=1")
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    for attribute in ("HttpOnly", "Secure", "SameSite=Lax", "Path=/"):
        assert attribute in cookie
    assert (await dashboard.client.get("/probe")).status_code == 200
    assert (await dashboard.client.get("/")).headers["Location"] == "/emails"


@pytest.mark.parametrize("next_url", ["//evil.example/x", "https://evil.example/", "/\\evil"])
async def test_no_open_redirect_after_login(dashboard: Dashboard, next_url: str) -> None:
    assert await dashboard.log_in(next_url=next_url) == "/emails"


async def test_unknown_user_and_wrong_password_get_the_same_answer(dashboard: Dashboard) -> None:
    answers = []
    for email, password in [("owner@example.com", "wrong"), ("nobody@example.com", PASSWORD)]:
        token = await dashboard.csrf()
        response = await dashboard.client.post(
            "/login", form={"email": email, "password": password, "csrf_token": token}
        )
        body = await response.get_data(True)
        answers.append((response.status_code, "Wrong email or password." in body))
        assert SESSION_COOKIE not in response.headers.get("Set-Cookie", "")
    assert answers == [(401, True), (401, True)]


async def test_too_many_failures_are_refused_before_the_password(dashboard: Dashboard) -> None:
    token = await dashboard.csrf()
    form = {"email": "owner@example.com", "password": "wrong", "csrf_token": token}
    # max_login_failures = 3: one a minute (half of it), three a quarter hour.
    assert (await dashboard.client.post("/login", form=form)).status_code == 401
    right = form | {"password": PASSWORD}
    refused = await dashboard.client.post("/login", form=right)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "Too many failed attempts. Try again in" in await refused.get_data(True)
    dashboard.clock.now += timedelta(minutes=1)
    assert (await dashboard.client.post("/login", form=right)).status_code == 303


async def test_forms_without_the_csrf_token_are_refused(dashboard: Dashboard) -> None:
    form = {"email": "owner@example.com", "password": PASSWORD}
    response = await dashboard.client.post("/login", form=form)
    assert response.status_code == 403
    assert "This form was refused" in await response.get_data(True)
    forged = await dashboard.client.post("/login", form=form | {"csrf_token": "forged"})
    assert forged.status_code == 403
    await dashboard.log_in()
    assert (await dashboard.client.post("/probe", form={})).status_code == 403
    # The login page's token is no longer good: a session has its own.
    session = await dashboard.current_session()
    ok = await dashboard.client.post("/probe", headers={"X-CSRF-Token": session.csrf_token})
    assert (ok.status_code, await ok.get_data(True)) == (200, "written")
    ok = await dashboard.client.post("/probe", form={"csrf_token": session.csrf_token})
    assert ok.status_code == 200


async def test_a_session_cookie_from_before_login_is_never_the_one_after(
    dashboard: Dashboard,
) -> None:
    # An attacker plants their own valid session in the victim's browser, then the victim logs in.
    planted_token, planted = await sessions.start_session(
        dashboard.ctx.spool,
        dashboard.owner,
        dashboard.team.id,
        mfa_pending=False,
        method="password",
        now=dashboard.ctx.now_seconds(),
    )
    dashboard.client.set_cookie("localhost", SESSION_COOKIE, planted_token)
    form = {"email": "owner@example.com", "password": PASSWORD, "csrf_token": planted.csrf_token}
    assert (await dashboard.client.post("/login", form=form)).status_code == 303
    after = dashboard.session_token()
    assert after is not None and after != planted_token
    limits, now = dashboard.ctx.session_limits, dashboard.ctx.now_seconds()
    assert sessions.load_session(dashboard.ctx.spool, planted_token, now, limits) is None
    assert planted.id not in [
        s.id for s in sessions.list_sessions(dashboard.ctx.spool, dashboard.owner.id, now, limits)
    ]


async def test_sessions_time_out_idle(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    assert (await dashboard.client.get("/probe")).status_code == 200
    dashboard.clock.now += timedelta(minutes=dashboard.ctx.config.dashboard.session_idle_minutes)
    assert (await dashboard.client.get("/probe")).status_code == 303


async def test_a_form_posted_after_its_session_ended_leads_to_login(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    csrf = (await dashboard.current_session()).csrf_token
    dashboard.clock.now += timedelta(hours=dashboard.ctx.config.dashboard.session_max_hours)
    response = await dashboard.client.post("/probe", form={"csrf_token": csrf})
    assert (response.status_code, response.headers["Location"]) == (303, "/login?next=/emails")


async def test_activity_is_recorded_at_most_once_a_minute(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    logged_in = (await dashboard.current_session()).last_seen_at
    dashboard.clock.now += timedelta(seconds=30)
    await dashboard.client.get("/probe")
    await trio.sleep(0.2)
    assert (await dashboard.current_session()).last_seen_at == logged_in
    dashboard.clock.now += timedelta(seconds=60)
    for _ in range(3):
        assert (await dashboard.client.get("/probe")).status_code == 200
    await trio.sleep(0.2)
    assert (await dashboard.current_session()).last_seen_at == logged_in + 90
    assert dashboard.ctx.touching == {(await dashboard.current_session()).id: logged_in}


async def test_logout_ends_the_session(dashboard: Dashboard) -> None:
    await dashboard.log_in()
    token = dashboard.session_token()
    session = await dashboard.current_session()
    response = await dashboard.client.post("/logout", form={"csrf_token": session.csrf_token})
    assert (response.status_code, response.headers["Location"]) == (303, "/login")
    limits, now = dashboard.ctx.session_limits, dashboard.ctx.now_seconds()
    assert sessions.load_session(dashboard.ctx.spool, token, now, limits) is None
    assert (await dashboard.client.get("/probe")).status_code == 303


async def test_roles(dashboard: Dashboard) -> None:
    await add_user(dashboard, "member@example.com", "member")
    await dashboard.log_in("member@example.com")
    csrf = (await dashboard.current_session()).csrf_token
    assert (await dashboard.client.get("/probe")).status_code == 200
    refused = await dashboard.client.post("/probe", form={"csrf_token": csrf})
    assert refused.status_code == 403
    assert "Your role in this team does not allow this" in await refused.get_data(True)
    assert (
        await dashboard.client.post("/probe/member", form={"csrf_token": csrf})
    ).status_code == 200
    assert (await dashboard.client.get("/probe/owner")).status_code == 403


async def test_a_pending_second_factor_reaches_only_the_challenge(
    dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    from postwire.dashboard import guard, login_flow

    monkeypatch.setattr(login_flow, "user_has_mfa", lambda spool, user_id: True)

    async def has_mfa(spool: object, user_id: str) -> bool:
        return True

    monkeypatch.setattr(guard, "user_has_mfa_parked", has_mfa)
    assert await dashboard.log_in(next_url="/probe") == "/login/mfa?next=/probe"
    assert (await dashboard.client.get("/probe")).headers["Location"] == "/login/mfa"
    assert (await dashboard.client.get("/login/mfa")).status_code == 200
    assert (await dashboard.current_session()).mfa_pending
    logout = await dashboard.client.post(
        "/logout", form={"csrf_token": (await dashboard.current_session()).csrf_token}
    )
    assert logout.status_code == 303


async def test_a_team_requiring_mfa_sends_users_without_it_to_enrol(dashboard: Dashboard) -> None:
    await users.set_team_policy(
        dashboard.ctx.spool, TeamPolicyRecord(dashboard.team.id, require_mfa=True)
    )
    await dashboard.log_in()
    response = await dashboard.client.get("/probe")
    assert (response.status_code, response.headers["Location"]) == (303, "/account/mfa")
    assert (await dashboard.client.get("/account/mfa")).status_code == 200


async def test_switching_teams_only_to_ones_the_user_belongs_to(dashboard: Dashboard) -> None:
    other = await accounts.create_team(dashboard.ctx.spool, "Beta", START)
    foreign = await accounts.create_team(dashboard.ctx.spool, "Foreign", START)
    await users.add_membership(dashboard.ctx.spool, dashboard.owner.id, other.id, "member", START)
    await dashboard.log_in()
    page = await (await dashboard.client.get("/probe/public")).get_data(True)
    assert page == "public"
    csrf = (await dashboard.current_session()).csrf_token
    await dashboard.client.post("/team/switch", form={"csrf_token": csrf, "team_id": foreign.id})
    assert (await dashboard.current_session()).team_id == dashboard.team.id
    await dashboard.client.post("/team/switch", form={"csrf_token": csrf, "team_id": other.id})
    assert (await dashboard.current_session()).team_id == other.id
    assert (await dashboard.client.get("/probe/owner")).status_code == 403  # a member there
    # Removed from that team, the session falls back to one the user still belongs to.
    membership = users.get_membership(dashboard.ctx.spool, dashboard.owner.id, other.id)
    assert membership is not None
    await users.remove_membership(dashboard.ctx.spool, membership)
    assert (await dashboard.client.get("/probe/owner")).status_code == 200


async def test_open_signup_makes_an_owner_of_a_new_team(dashboard: Dashboard) -> None:
    token = await dashboard.csrf("/signup")
    form = {
        "name": "Grace",
        "email": "grace@example.com",
        "password": PASSWORD,
        "team": "",
        "csrf_token": token,
    }
    response = await dashboard.client.post("/signup", form=form)
    assert (response.status_code, response.headers["Location"]) == (303, "/emails")
    grace = users.find_user_by_email(dashboard.ctx.spool, "grace@example.com")
    assert grace is not None and not grace.email_verified
    ((membership, team),) = users.memberships_of(dashboard.ctx.spool, grace)
    assert (membership.role, team.name) == ("owner", "Grace's team")
    again = await dashboard.client.post("/signup", form=form | {"csrf_token": token})
    assert again.status_code in (400, 403)


async def test_signups_per_client_address_are_limited(dashboard: Dashboard) -> None:
    statuses, allowed = [], dashboard.ctx.config.auth.max_signups_per_address
    for n in range(allowed + 1):
        form = {"name": f"P{n}", "email": f"p{n}@example.com", "password": PASSWORD, "team": ""}
        form["csrf_token"] = await dashboard.csrf("/signup")
        response = await dashboard.client.post("/signup", form=form)
        statuses.append(response.status_code)
        if response.status_code == 303:  # signed in as the new user: sign out for the next
            csrf = (await dashboard.current_session()).csrf_token
            await dashboard.client.post("/logout", form={"csrf_token": csrf})
    assert statuses == [303] * allowed + [429]


async def test_signup_is_closed_when_invite_only(dashboard: Dashboard) -> None:
    auth = dataclasses.replace(dashboard.ctx.config.auth, signup="invite_only")
    dashboard.ctx.config = dataclasses.replace(dashboard.ctx.config, auth=auth)
    page = await (await dashboard.client.get("/signup")).get_data(True)
    assert "Sign-up is by invitation" in page
