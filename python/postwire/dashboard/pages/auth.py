"""Signing in and out, signing up, and switching teams: `/`, `/login`, `/logout`, `/signup`,
`/team/switch`.

A failed login says the same, and costs the same work, whether the address is unknown or the
password wrong. Attempts are counted per account and client address, and per client address,
before any password is checked (`login_limits`): past the allowance the answer is 429 with a
Retry-After, and a server with too many password checks under way answers 503.
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, Response, flash, g, render_template, request

from postwire.accounts import login_limits, passwords, sessions
from postwire.accounts import users as accounts_users
from postwire.accounts.bootstrap import check_email
from postwire.accounts.email_verification import send_verification
from postwire.accounts.system_mail import SystemMailer
from postwire.accounts.users import EmailTakenError
from postwire.dashboard.access import pending_mfa, public, requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import (
    LoginRefused,
    clear_session_cookie,
    finish_login,
    session_admits_team,
)
from postwire.dashboard.next_url import safe_next
from postwire.dashboard.redirects import see_other
from postwire.errors import PostwireError
from postwire.store.accounts import create_team
from postwire.store.users import UserRecord

WRONG_CREDENTIALS: Final = "Wrong email or password."
TOO_BUSY: Final = "Too many sign-ins are being checked right now. Try again in a moment."
TOO_BUSY_RETRY_AFTER: Final = 2
MAX_NAME_LENGTH: Final = 100


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("auth", __name__)
    mailer = SystemMailer(ctx.config, ctx.spool, ctx.delivery)

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
        user = accounts_users.find_user_by_email(ctx.spool, email) if email else None
        stored = user.password_hash if user is not None else None
        try:
            matched = await login_limits.check_password(
                ctx.spool, ctx.config.auth, email, address, stored, password, ctx.now_seconds()
            )
        except login_limits.Throttled as throttled:
            page = await _render_login(ctx, next_url, email, too_many_attempts(throttled))
            return refusal(page, 429, throttled.retry_after)
        except passwords.PasswordWorkBusy:
            page = await _render_login(ctx, next_url, email, TOO_BUSY)
            return refusal(page, 503, TOO_BUSY_RETRY_AFTER)
        if user is None or stored is None or not matched:
            return await _render_login(ctx, next_url, email, WRONG_CREDENTIALS), 401
        if passwords.needs_rehash(stored):
            user = await accounts_users.set_password_hash(
                ctx.spool, user, await passwords.hash_password(password)
            )
        try:
            return await finish_login(ctx, user, method="password", next_url=next_url)
        except LoginRefused as refused:
            return await _render_login(ctx, next_url, email, refused.message), 403

    @bp.get("/signup")
    @public
    async def signup_form() -> str | Response:
        if ctx.config.auth.signup != "open":
            return await _render_signup_closed()
        if g.viewer is not None and not g.viewer.session.mfa_pending:
            return see_other("/emails")
        return await render_template("signup.html", form={}, error=None)

    @bp.post("/signup")
    @public
    async def signup() -> tuple[str, int] | Response:
        if ctx.config.auth.signup != "open":
            return await _render_signup_closed(), 403
        form = await request.form
        entered = {key: form.get(key, "").strip() for key in ("name", "email", "team")}
        problem = signup_problem(entered["name"], entered["email"], form.get("password", ""))
        if problem is not None:
            return await render_template("signup.html", form=entered, error=problem), 400
        address = request.remote_addr or ""
        try:
            counted = await login_limits.count_signup(
                ctx.spool, ctx.config.auth, address, ctx.now_seconds()
            )
        except login_limits.Throttled as throttled:
            message = "Too many accounts were opened from your address. Try again later."
            page = await render_template("signup.html", form=entered, error=message)
            return refusal(page, 429, throttled.retry_after)
        try:
            user = await create_signed_up_owner(ctx, entered, form.get("password", ""))
        except EmailTakenError:
            # Counted all the same: sign-ups must not be a free way to ask who has an account.
            problem = "This address has an account already: sign in, or reset its password."
            return await render_template("signup.html", form=entered, error=problem), 400
        except passwords.PasswordWorkBusy:
            await login_limits.signup_not_made(ctx.spool, counted)
            page = await render_template("signup.html", form=entered, error=TOO_BUSY)
            return refusal(page, 503, TOO_BUSY_RETRY_AFTER)
        await send_verification(
            ctx.spool, mailer, user, public_url=ctx.config.dashboard.public_url, now=ctx.now()
        )
        await flash(f"Welcome! We sent a link to {user.email} to check the address.", "success")
        return await finish_login(ctx, user, method="password", next_url="/emails")

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
        elif not session_admits_team(ctx, membership, g.viewer.session):
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


def too_many_attempts(throttled: login_limits.Throttled) -> str:
    return f"Too many failed attempts. Try again in {wait_in_words(throttled.retry_after)}."


def wait_in_words(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = -(-seconds // 60)
    if minutes < 90:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = -(-minutes // 60)
    return f"{hours} hours"


def refusal(page: str, status: int, retry_after: int) -> Response:
    """A page refusing for now: the status, and when to come back (Retry-After)."""
    response = Response(page, status=status, mimetype="text/html")
    response.headers["Retry-After"] = str(retry_after)
    return response


def signup_problem(name: str, email: str, password: str) -> str | None:
    """What is wrong with a sign-up form, in plain words, or None."""
    if not name or len(name) > MAX_NAME_LENGTH:
        return f"Enter your name (at most {MAX_NAME_LENGTH} characters)."
    try:
        check_email(email)
    except PostwireError:
        return "Enter a valid email address."
    return passwords.password_problem(password)


async def create_signed_up_owner(
    ctx: DashboardContext, entered: dict[str, str], password: str
) -> UserRecord:
    """A new user (address not yet checked) owning a new team of their own."""
    now = ctx.now()
    user = await accounts_users.create_user(
        ctx.spool,
        email=entered["email"],
        name=entered["name"],
        now=now,
        password_hash=await passwords.hash_password(password),
    )
    team_name = entered["team"][:MAX_NAME_LENGTH] or f"{entered['name']}'s team"
    team = await create_team(ctx.spool, team_name, now)
    await accounts_users.add_membership(ctx.spool, user.id, team.id, "owner", now)
    return user


async def _render_signup_closed() -> str:
    return await render_template(
        "error.html",
        title="Sign-up is by invitation",
        message="Accounts on this Postwire are made by invitation. Ask a team owner to invite "
        "you, then open the link in the invitation.",
    )


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
