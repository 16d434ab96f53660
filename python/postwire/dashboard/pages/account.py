"""The Account page (name, password, address check, sessions; two-factor devices are on
/account/mfa) and the pages of emailed links: password reset, first password, address check.

Account changes concern the viewer alone, so any member may make them (`@requires("member")`);
the link pages are public, and each link is used only when its form is sent (a mail scanner
that opens links uses none).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Final, cast

from quart import Blueprint, Response, current_app, flash, g, render_template, request
from quart_trio import QuartTrio
from werkzeug.exceptions import NotFound

from postwire.accounts import login_limits, users
from postwire.accounts.email_verification import send_verification, starts_afresh, verify_email
from postwire.accounts.links import (
    SET_PASSWORD_TTL,
    LinkPurpose,
    LinkRefused,
    check_link,
    issue_link,
)
from postwire.accounts.password_reset import (
    PasswordRefused,
    request_password_reset,
    set_password_by_link,
)
from postwire.accounts.passwords import hash_password, password_problem
from postwire.accounts.sessions import end_other_sessions, end_session, list_sessions_parked
from postwire.accounts.system_mail import SystemMailer
from postwire.accounts.users import TEAMS_READ_AT_ONCE, EmailTakenError
from postwire.compose.addresses import is_address
from postwire.concurrency import in_order
from postwire.dashboard.access import changes_sign_in, public, requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.redirects import see_other
from postwire.dashboard.viewer import Viewer
from postwire.store.accounts import TeamRecord
from postwire.store.sessions import sessions_of_user
from postwire.store.sso import SsoConfigRecord, get_sso_config_parked
from postwire.store.sso_identities import SsoIdentityRecord, sso_identities_of_user_parked
from postwire.store.users import UserRecord, normalize_email

MAX_NAME: Final = 200
FORGOT_ANSWER: Final = (
    "If an account has this address, a link to choose a new password is on its way. It works "
    "for an hour."
)
# The two pages that set a password by link, and the link each accepts.
PASSWORD_LINKS: Final[dict[str, LinkPurpose]] = {"reset": "reset_password", "set": "set_password"}


def _moment(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _viewer() -> Viewer:
    viewer: Viewer = g.viewer
    return viewer


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("account", __name__)
    mailer = SystemMailer(ctx.config, ctx.spool, ctx.delivery)
    public_url = ctx.config.dashboard.public_url

    async def back_to_account(message: str, category: str = "error") -> Response:
        await flash(message, category)
        return see_other("/account")

    @blueprint.get("/account")
    async def account_page() -> str:
        viewer = _viewer()
        now = ctx.now_seconds()
        return await render_template(
            "account.html",
            sessions=[
                (session, _moment(session.created_at), _moment(session.last_seen_at))
                for session in await list_sessions_parked(
                    ctx.spool, viewer.user.id, now, ctx.session_limits
                )
            ],
            current_session_id=viewer.session.id,
            teams=viewer.teams,
            sso_teams=await sso_teams_of(viewer),
        )

    async def sso_teams_of(viewer: Viewer) -> list[tuple[TeamRecord, list[SsoIdentityRecord]]]:
        """The viewer's teams that sign in through their own provider, each with the
        identities of it linked to this account (the teams' settings read together)."""
        links = await sso_identities_of_user_parked(ctx.spool, viewer.user.id)
        teams = [team for _, team in viewer.teams]

        async def config_of(team: TeamRecord) -> SsoConfigRecord | None:
            return await get_sso_config_parked(ctx.spool, team.id)

        configs = await in_order(config_of, teams, at_once=TEAMS_READ_AT_ONCE)
        return [
            (team, [link for link in links if link.team_id == team.id])
            for team, config in zip(teams, configs, strict=True)
            if config is not None and config.protocol
        ]

    @blueprint.post("/account/name")
    @requires("member")
    async def rename() -> Response:
        form = await request.form
        name = " ".join(form.get("name", "").split())
        if not name or len(name) > MAX_NAME:
            return await back_to_account(f"Enter a name of 1 to {MAX_NAME} characters.")
        await users.update_user(ctx.spool, replace(_viewer().user, name=name))
        return await back_to_account("Your name was changed.", "success")

    @blueprint.post("/account/password")
    @changes_sign_in
    @requires("member")
    async def change_password() -> Response:
        viewer = _viewer()
        form = await request.form
        if not await current_password_ok(viewer.user, form.get("current", "")):
            return await back_to_account("The current password is not right.")
        password = form.get("password", "")
        problem = password_problem(password)
        if problem is None and password != form.get("password_confirm", ""):
            problem = "The two new passwords differ."
        if problem is not None:
            return await back_to_account(problem)
        await users.set_password_hash(ctx.spool, viewer.user, await hash_password(password))
        ended = await end_other_sessions(ctx.spool, viewer.session)
        others = f" {ended} other session{'s' if ended != 1 else ''} ended." if ended else ""
        return await back_to_account(f"Your password was changed.{others}", "success")

    async def current_password_ok(user: UserRecord, password: str) -> bool:
        """Whether `password` is the user's (an account made through Google, GitHub or SSO
        has none yet: it passes). Wrong ones count against the login limits, so a stolen
        session cannot guess the password here."""
        if user.password_hash is None:
            return True
        address = request.remote_addr or ""
        return await login_limits.check_current_password(
            ctx.spool, ctx.config.auth, user, password, address, ctx.now_seconds()
        )

    @blueprint.post("/account/email")
    @changes_sign_in
    @requires("member")
    async def change_address() -> Response:
        viewer = _viewer()
        form = await request.form
        email = form.get("email", "").strip()
        if not is_address(email):
            return await back_to_account(f"{email or 'That'} is not an email address.")
        if normalize_email(email) == normalize_email(viewer.user.email):
            return await back_to_account("That is your address already.")
        if not await current_password_ok(viewer.user, form.get("current", "")):
            return await back_to_account("The current password is not right.")
        try:
            changed = await users.request_email_change(ctx.spool, viewer.user, email)
        except EmailTakenError:
            return await back_to_account("That address belongs to another account.")
        sent = await send_verification(
            ctx.spool, mailer, changed, public_url=public_url, now=ctx.now(), address=email
        )
        if not sent:
            return await back_to_account("A link was sent a moment ago: try again later.")
        return await back_to_account(
            f"Open the link we mailed to {email}: your address changes to it once you do."
            f" Until then it stays {changed.email}.",
            "success",
        )

    @blueprint.post("/account/sessions/others")
    @requires("member")
    async def log_out_others() -> Response:
        ended = await end_other_sessions(ctx.spool, _viewer().session)
        plural = "s" if ended != 1 else ""
        return await back_to_account(f"{ended} other session{plural} signed out.", "success")

    @blueprint.post("/account/sessions/<session_id>/end")
    @requires("member")
    async def log_out_one(session_id: str) -> Response:
        viewer = _viewer()
        # Looked up among the viewer's own sessions: another user's id finds nothing.
        found = [s for s in sessions_of_user(ctx.spool, viewer.user.id) if s.id == session_id]
        if not found:
            raise NotFound
        if found[0].id == viewer.session.id:
            return await back_to_account("To end this browser's session, sign out.")
        await end_session(ctx.spool, found[0])
        return await back_to_account("That session was signed out.", "success")

    @blueprint.post("/account/verify")
    @requires("member")
    async def resend_verification() -> Response:
        viewer = _viewer()
        if viewer.user.email_verified:
            return await back_to_account("Your address is confirmed already.", "success")
        sent = await send_verification(
            ctx.spool, mailer, viewer.user, public_url=public_url, now=ctx.now()
        )
        if not sent:
            return await back_to_account("A link was sent a moment ago: try again later.")
        return await back_to_account(f"A link was sent to {viewer.user.email}.", "success")

    def holder_signed_in() -> str | None:
        """The account whose holder this browser is signed in as (second factor passed)."""
        viewer: Viewer | None = g.get("viewer")
        if viewer is None or viewer.session.mfa_pending:
            return None
        return viewer.user.id

    def link_user(user_id: str | None) -> UserRecord | None:
        return None if user_id is None else users.get_user(ctx.spool, user_id)

    own_team = ctx.config.auth.signup == "open"

    @blueprint.get("/verify/<token>")
    @public
    async def verification(token: str) -> tuple[str, int]:
        try:
            link = check_link(ctx.spool, token, ("verify_email",), ctx.now())
        except LinkRefused as refusal:
            return await render_template("verify.html", error=str(refusal), token=token), 410
        user = link_user(link.user_id)
        afresh = user is not None and starts_afresh(user, link.email, holder_signed_in())
        page = await render_template(
            "verify.html", email=link.email, token=token, afresh=afresh, own_team=own_team
        )
        return page, 200

    @blueprint.post("/verify/<token>")
    @public
    async def verify(token: str) -> Response | tuple[str, int]:
        try:
            user, fresh_start = await verify_email(
                ctx.spool, token, ctx.now(), signed_in_as=holder_signed_in(), own_team=own_team
            )
        except LinkRefused as refusal:
            return await render_template("verify.html", error=str(refusal), token=token), 410
        except EmailTakenError:
            taken = "This address belongs to another account now: your address did not change."
            return await render_template("verify.html", error=taken, token=token), 409
        await flash(f"{user.email} is confirmed.", "success")
        if fresh_start is not None:
            # The account has no password now: the person who proved the mailbox chooses one.
            await flash(fresh_start.summary(), "warning")
            set_token, _ = await issue_link(
                ctx.spool,
                "set_password",
                email=normalize_email(user.email),
                user_id=user.id,
                ttl=SET_PASSWORD_TTL,
                now=ctx.now(),
            )
            return see_other(f"/password/set/{set_token}")
        return see_other("/account" if g.get("viewer") is not None else "/login")

    @blueprint.get("/password/forgot")
    @public
    async def forgot_form() -> str:
        return await render_template("password_forgot.html", sent=False)

    @blueprint.post("/password/forgot")
    @public
    async def forgot() -> str:
        form = await request.form
        email = form.get("email", "").strip()[:320]
        if email:
            # Off the request: the answer takes as long whether or not a link is mailed.
            cast(QuartTrio, current_app).nursery.start_soon(
                partial(
                    request_password_reset,
                    ctx.spool,
                    mailer,
                    email=email,
                    client=request.remote_addr or "",
                    public_url=public_url,
                    now=ctx.now(),
                )
            )
        return await render_template("password_forgot.html", sent=True, answer=FORGOT_ANSWER)

    async def password_page(
        kind: str, token: str, error: str | None, status: int
    ) -> tuple[str, int]:
        email = None
        afresh = False
        if error is None or status == 400:
            try:
                link = check_link(ctx.spool, token, (PASSWORD_LINKS[kind],), ctx.now())
                email = link.email
                user = link_user(link.user_id)
                afresh = user is not None and not user.email_verified
            except LinkRefused as refusal:
                error, status = str(refusal), 410
        page = await render_template(
            "password_set.html",
            kind=kind,
            token=token,
            email=email,
            error=error,
            afresh=afresh,
            own_team=own_team,
        )
        return page, status

    @blueprint.get("/password/<any(reset, set):kind>/<token>")
    @public
    async def password_form(kind: str, token: str) -> tuple[str, int]:
        return await password_page(kind, token, None, 200)

    @blueprint.post("/password/<any(reset, set):kind>/<token>")
    @public
    async def set_password(kind: str, token: str) -> Response | tuple[str, int]:
        form = await request.form
        password = form.get("password", "")
        if password != form.get("password_confirm", ""):
            return await password_page(kind, token, "The two passwords differ.", 400)
        try:
            check_link(ctx.spool, token, (PASSWORD_LINKS[kind],), ctx.now())
            _, fresh_start = await set_password_by_link(
                ctx.spool, token, password, ctx.now(), own_team=own_team
            )
        except PasswordRefused as refusal:
            return await password_page(kind, token, str(refusal), 400)
        except LinkRefused as refusal:
            return await password_page(kind, token, str(refusal), 410)
        if fresh_start is not None:
            await flash(fresh_start.summary(), "warning")
        await flash("Your password is set. Sign in with it.", "success")
        return see_other("/login")

    return blueprint
