"""The second step of a login (/login/mfa): a session that passed the password is held here
until a TOTP code, a recovery code or one of the user's passkeys is presented; then the
session is replaced by a full one (`login_flow.finish_mfa`).

Also "Sign in with a passkey" from the login page (/login/passkey): a discoverable credential
names its user and proves two factors at once (the device, and the PIN or biometric that
unlocked it, since user verification is required), so it ends the login without a challenge.
Its WebAuthn challenge is kept for the browser's anonymous CSRF cookie, which another site can
neither read nor set.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from quart import Blueprint, Response, flash, g, render_template, request
from werkzeug.exceptions import BadRequest

from postwire.accounts import mfa, sessions
from postwire.accounts import users as accounts_users
from postwire.accounts.passkeys import RelyingParty
from postwire.dashboard import login_flow
from postwire.dashboard.access import pending_mfa, public
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.csrf import ANONYMOUS_COOKIE
from postwire.dashboard.next_url import safe_next
from postwire.dashboard.redirects import see_other
from postwire.store import mfa_devices

CHALLENGE_PATH = "/login/mfa"
# The second step must follow the first within this long; a session held at it longer (a
# password left typed in on a shared computer) is ended and the login starts over.
PENDING_SECONDS = 10 * 60


def _holder() -> str:
    return f"session/{g.session.id}"


def _anonymous_holder() -> str:
    cookie = request.cookies.get(ANONYMOUS_COOKIE)
    if not cookie:
        raise BadRequest("Reload the login page and try again.")
    return "browser/" + hashlib.sha256(cookie.encode()).hexdigest()


async def _pending_too_long(ctx: DashboardContext) -> Response | None:
    """The answer that starts the login over, when the pending session is too old; else None."""
    if ctx.now_seconds() - g.session.created_at <= PENDING_SECONDS:
        return None
    await sessions.end_session(ctx.spool, g.session)
    await flash("The second step took too long. Sign in again.", "error")
    response = see_other("/login")
    login_flow.clear_session_cookie(response)
    return response


def _challenge_url(next_url: str) -> str:
    return f"{CHALLENGE_PATH}?next={quote(next_url, safe='/')}"


def add_routes(bp: Blueprint, ctx: DashboardContext) -> None:
    def rp() -> RelyingParty:
        return RelyingParty.from_public_url(ctx.config.dashboard.public_url)

    @bp.get(CHALLENGE_PATH)
    @pending_mfa
    async def challenge() -> str | Response:
        next_url = safe_next(request.args.get("next"))
        if not g.session.mfa_pending:
            return see_other(next_url)
        if (expired := await _pending_too_long(ctx)) is not None:
            return expired
        devices = mfa.confirmed_devices(ctx.spool, g.session.user_id)
        return await render_template(
            "mfa_challenge.html",
            next_url=next_url,
            has_totp=any(d.kind == "totp" for d in devices),
            has_passkey=any(d.kind == "passkey" for d in devices),
        )

    @bp.post(CHALLENGE_PATH)
    @pending_mfa
    async def check_code() -> Response:
        form = await request.form
        next_url = safe_next(form.get("next"))
        if not g.session.mfa_pending:
            return see_other(next_url)
        if (expired := await _pending_too_long(ctx)) is not None:
            return expired
        outcome = await mfa.check_code(
            ctx.spool,
            g.session.user_id,
            form.get("code", ""),
            ctx.now(),
            max_failures=ctx.config.auth.max_login_failures,
        )
        if outcome == "ok":
            return await login_flow.finish_mfa(ctx, next_url)
        if outcome == "too_many":
            message = "Too many wrong codes. Wait 15 minutes, then try again."
        else:
            message = "That code was not accepted. Enter the code your app shows now."
        await flash(message, "error")
        return see_other(_challenge_url(next_url))

    @bp.post(f"{CHALLENGE_PATH}/passkey/options")
    @pending_mfa
    async def challenge_passkey_options() -> Response:
        if g.session.mfa_pending and await _pending_too_long(ctx) is not None:
            return Response("The second step took too long.", status=400, mimetype="text/plain")
        try:
            options = await mfa.begin_passkey_login(
                ctx.spool, _holder(), rp(), g.session.user_id, ctx.now()
            )
        except mfa.MfaError as error:
            return Response(str(error), status=400, mimetype="text/plain")
        return Response(options, mimetype="application/json")

    @bp.post(f"{CHALLENGE_PATH}/passkey")
    @pending_mfa
    async def challenge_passkey() -> Response:
        form = await request.form
        next_url = safe_next(form.get("next"))
        if not g.session.mfa_pending:
            return see_other(next_url)
        if (expired := await _pending_too_long(ctx)) is not None:
            return expired
        try:
            login = await mfa.finish_passkey_login(
                ctx.spool, _holder(), rp(), form.get("credential", ""), ctx.now()
            )
        except mfa.MfaError as error:
            await flash(str(error), "error")
            return see_other(_challenge_url(next_url))
        if login.user_id != g.session.user_id:  # the challenge named the user: belt and braces
            await flash("This passkey belongs to another account.", "error")
            return see_other(_challenge_url(next_url))
        return await login_flow.finish_mfa(ctx, next_url)

    @bp.post("/login/passkey/options")
    @public
    async def passkey_login_options() -> Response:
        options = await mfa.begin_passkey_login(
            ctx.spool, _anonymous_holder(), rp(), None, ctx.now()
        )
        return Response(options, mimetype="application/json")

    @bp.post("/login/passkey")
    @public
    async def passkey_login() -> Response:
        form = await request.form
        next_url = form.get("next")
        try:
            login = await mfa.finish_passkey_login(
                ctx.spool, _anonymous_holder(), rp(), form.get("credential", ""), ctx.now()
            )
        except mfa.MfaError as error:
            await flash(str(error), "error")
            return see_other("/login")
        user = accounts_users.get_user(ctx.spool, login.user_id)
        if user is None:
            # The user was deleted after registering it: the passkey is an orphan.
            await mfa_devices.delete_device(ctx.spool, login.device)
            await flash("This passkey is not registered here.", "error")
            return see_other("/login")
        try:
            return await login_flow.finish_login(ctx, user, method="passkey", next_url=next_url)
        except login_flow.LoginRefused as refused:
            await flash(refused.message, "error")
            return see_other("/login")
