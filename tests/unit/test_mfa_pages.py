"""The MFA step of a login through Quart's test client on a real spool, with a clock the test
moves: the step completes with a code (a new session token, `next` kept local), a code is not
taken twice, and a step left pending too long starts the login over."""

from __future__ import annotations

from datetime import timedelta

import pyotp

from postwire.accounts import mfa, sessions
from postwire.dashboard.pages.mfa_challenge import PENDING_SECONDS
from tests.unit.test_dashboard_guard import Dashboard, dashboard

__all__ = ["dashboard"]  # the fixture, shared with the guard's tests


async def enrol(dashboard: Dashboard) -> str:
    user_id, now = dashboard.owner.id, dashboard.clock.now
    device = await mfa.start_totp_enrolment(dashboard.ctx.spool, user_id, now)
    code = pyotp.TOTP(device.totp_secret).at(now)
    await mfa.confirm_totp(dashboard.ctx.spool, user_id, device.id, code, "Phone", now)
    return device.totp_secret


async def answer(dashboard: Dashboard, code: str, next_url: str) -> str:
    token = await dashboard.csrf("/login/mfa")
    form = {"code": code, "csrf_token": token, "next": next_url}
    response = await dashboard.client.post("/login/mfa", form=form)
    assert response.status_code == 303, await response.get_data(True)
    return response.headers["Location"]


async def test_a_code_completes_the_step_once_with_a_new_token(dashboard: Dashboard) -> None:
    secret = await enrol(dashboard)
    dashboard.clock.now += timedelta(seconds=30)
    assert await dashboard.log_in(next_url="/domains") == "/login/mfa?next=/domains"
    pending_token = dashboard.session_token()
    assert (await dashboard.client.get("/emails")).headers["Location"] == "/login/mfa"

    code = pyotp.TOTP(secret).at(dashboard.clock.now)
    assert await answer(dashboard, "000000", "/domains") == "/login/mfa?next=/domains"
    assert await answer(dashboard, code, "/domains") == "/domains"
    assert dashboard.session_token() != pending_token
    assert not (await dashboard.current_session()).mfa_pending
    # The pending session's token signs no one in any more.
    spool, now = dashboard.ctx.spool, dashboard.ctx.now_seconds()
    assert sessions.load_session(spool, pending_token, now, dashboard.ctx.session_limits) is None

    # Signed out and in again within the same 30 seconds: the same code is refused.
    token = await dashboard.csrf("/emails")
    await dashboard.client.post("/logout", form={"csrf_token": token})
    await dashboard.log_in()
    assert await answer(dashboard, code, "/emails") == "/login/mfa?next=/emails"


async def test_next_after_the_step_stays_on_this_site(dashboard: Dashboard) -> None:
    secret = await enrol(dashboard)
    dashboard.clock.now += timedelta(seconds=30)
    await dashboard.log_in()
    code = pyotp.TOTP(secret).at(dashboard.clock.now)
    assert await answer(dashboard, code, "//evil.example/x") == "/emails"


async def test_a_step_pending_too_long_starts_the_login_over(dashboard: Dashboard) -> None:
    secret = await enrol(dashboard)
    await dashboard.log_in()
    pending = await dashboard.current_session()
    dashboard.clock.now += timedelta(seconds=PENDING_SECONDS + 60)
    code = pyotp.TOTP(secret).at(dashboard.clock.now)
    token = pending.csrf_token
    response = await dashboard.client.post(
        "/login/mfa", form={"code": code, "csrf_token": token, "next": "/emails"}
    )
    assert (response.status_code, response.headers["Location"]) == (303, "/login")
    assert dashboard.session_token() in (None, "")
    spool, now, limits = (
        dashboard.ctx.spool,
        dashboard.ctx.now_seconds(),
        dashboard.ctx.session_limits,
    )
    assert sessions.list_sessions(spool, pending.user_id, now, limits) == []
