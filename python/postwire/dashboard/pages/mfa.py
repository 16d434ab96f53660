"""MFA pages: the user's second factors (/account/mfa: TOTP enrolment with a QR code, passkeys,
recovery codes, removal), the challenge after the password (/login/mfa, in `mfa_challenge`),
and the team's "require MFA" setting (/team/mfa, owners only).

Every member manages their own factors (POSTs here need `member`, not the default `admin`),
and enrolment stays reachable when the team requires MFA of a user who has none yet.
Recovery codes are shown in the answer to the POST that made them, never again: the page is
not cached and the codes are not kept anywhere but as digests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from quart import Blueprint, Response, flash, g, render_template, request
from werkzeug.exceptions import NotFound

from postwire.accounts import login_limits, mfa
from postwire.accounts.passkeys import RelyingParty
from postwire.accounts.system_mail import SystemMail, SystemMailer
from postwire.dashboard.access import changes_sign_in, mfa_setup, requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages import mfa_challenge
from postwire.dashboard.redirects import see_other
from postwire.dashboard.viewer import Viewer
from postwire.store import mfa_devices
from postwire.store.mfa_devices import MfaDevice, user_has_mfa_parked
from postwire.store.users import UserRecord

ACCOUNT_PATH = "/account/mfa"


@dataclass(frozen=True, slots=True)
class DeviceRow:
    id: str
    kind: str  # "Authenticator app" or "Passkey"
    name: str
    added: str
    last_used: str


def _day(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _rows(devices: list[MfaDevice]) -> list[DeviceRow]:
    return [
        DeviceRow(
            d.id,
            "Passkey" if d.kind == "passkey" else "Authenticator app",
            d.name,
            _day(d.created_at_ms),
            _day(d.last_used_at_ms),
        )
        for d in devices
    ]


def relying_party(ctx: DashboardContext) -> RelyingParty:
    return RelyingParty.from_public_url(ctx.config.dashboard.public_url)


def challenge_holder() -> str:
    """Whose WebAuthn challenge it is: the session's (a new login gets a new one)."""
    return f"session/{g.session.id}"


def _viewer() -> Viewer:
    viewer: Viewer = g.viewer
    return viewer


async def reauthenticated(ctx: DashboardContext, user: UserRecord, form: dict[str, str]) -> bool:
    """Whether the form proves the person is the user again: their password, or a code from
    their authenticator (or a recovery code, used up). Wrong passwords count against the
    login limits, wrong codes as at the MFA challenge: a stolen session cannot guess either."""
    limit = ctx.config.auth.max_login_failures
    password = form.get("password", "")
    if password and user.password_hash is not None:
        address = request.remote_addr or ""
        return await login_limits.check_current_password(
            ctx.spool, ctx.config.auth, user, password, address, ctx.now_seconds()
        )
    code = form.get("code", "")
    if not code:
        return False
    return await mfa.check_code(ctx.spool, user.id, code, ctx.now(), max_failures=limit) == "ok"


async def notify_change(
    ctx: DashboardContext, mailer: SystemMailer, user: UserRecord, change: str
) -> None:
    """Tell the user their second factors changed, so a change they did not make (a session
    left open, a stolen password) does not go unnoticed."""
    notice = SystemMail(
        to=user.email,
        subject="Two-factor authentication changed on your Postwire account",
        lines=(
            f"{change} on your Postwire account {user.email}.",
            "If this was not you, sign in, remove what you do not recognise, and change your "
            "password:",
        ),
        link=f"{ctx.config.dashboard.public_url}{ACCOUNT_PATH}",
        what="two-factor change notice",
        closing="Postwire sends this message whenever the second factors of an account change.",
    )
    await mailer.send(notice, ctx.now())


async def _recovery_codes_page(codes: list[str], title: str) -> Response:
    body = await render_template("mfa_recovery_codes.html", codes=codes, title=title)
    response = Response(body, mimetype="text/html")
    response.headers["Cache-Control"] = "no-store"
    return response


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("mfa", __name__)
    mailer = SystemMailer(ctx.config, ctx.spool, ctx.delivery)
    mfa_challenge.add_routes(bp, ctx)

    @bp.get(ACCOUNT_PATH)
    @mfa_setup
    async def account_mfa() -> str:
        viewer = _viewer()
        devices = await mfa.confirmed_devices_parked(ctx.spool, viewer.user.id)
        return await render_template(
            "mfa_account.html",
            devices=_rows(devices),
            has_passkey=any(d.kind == "passkey" for d in devices),
            recovery_left=await mfa.unused_recovery_codes(ctx.spool, viewer.user.id),
            has_password=viewer.user.password_hash is not None,
            team_requires=viewer.policy.require_mfa,
        )

    @bp.post(f"{ACCOUNT_PATH}/totp")
    @changes_sign_in
    @mfa_setup
    @requires("member")
    async def start_totp() -> Response:
        try:
            device = await mfa.start_totp_enrolment(ctx.spool, _viewer().user.id, ctx.now())
        except mfa.MfaError as error:
            await flash(str(error), "error")
            return see_other(ACCOUNT_PATH)
        return see_other(f"{ACCOUNT_PATH}/totp/{device.id}")

    def pending(device_id: str) -> MfaDevice:
        device = mfa.pending_totp(ctx.spool, _viewer().user.id, device_id, ctx.now())
        if device is None:
            raise NotFound
        return device

    @bp.get(f"{ACCOUNT_PATH}/totp/<device_id>")
    @mfa_setup
    async def totp_enrolment(device_id: str) -> str:
        device = pending(device_id)
        return await render_template(
            "mfa_totp.html",
            device_id=device.id,
            secret=" ".join(device.totp_secret[i : i + 4] for i in range(0, 32, 4)),
            account=_viewer().user.email,
        )

    @bp.get(f"{ACCOUNT_PATH}/totp/<device_id>/qr.svg")
    @mfa_setup
    async def totp_qr_code(device_id: str) -> Response:
        device = pending(device_id)
        svg = mfa.totp_qr_svg(device, _viewer().user.email)
        response = Response(svg, mimetype="image/svg+xml")
        response.headers["Cache-Control"] = "no-store"
        return response

    @bp.post(f"{ACCOUNT_PATH}/totp/<device_id>")
    @changes_sign_in
    @mfa_setup
    @requires("member")
    async def confirm_totp(device_id: str) -> Response:
        form = await request.form
        viewer = _viewer()
        try:
            codes = await mfa.confirm_totp(
                ctx.spool,
                viewer.user.id,
                device_id,
                form.get("code", ""),
                form.get("name", ""),
                ctx.now(),
            )
        except mfa.MfaError as error:
            await flash(str(error), "error")
            if mfa.pending_totp(ctx.spool, viewer.user.id, device_id, ctx.now()) is None:
                return see_other(ACCOUNT_PATH)
            return see_other(f"{ACCOUNT_PATH}/totp/{device_id}")
        await notify_change(ctx, mailer, viewer.user, "An authenticator app was added")
        if codes is not None:
            return await _recovery_codes_page(codes, "Authenticator app added")
        await flash("Authenticator app added.", "success")
        return see_other(ACCOUNT_PATH)

    @bp.post(f"{ACCOUNT_PATH}/passkeys/options")
    @changes_sign_in
    @mfa_setup
    @requires("member")
    async def passkey_registration_options() -> Response:
        viewer = _viewer()
        try:
            options = await mfa.begin_passkey_registration(
                ctx.spool,
                challenge_holder(),
                relying_party(ctx),
                viewer.user.id,
                viewer.user.email,
                ctx.now(),
            )
        except mfa.MfaError as error:
            return Response(str(error), status=400, mimetype="text/plain")
        return Response(options, mimetype="application/json")

    @bp.post(f"{ACCOUNT_PATH}/passkeys")
    @changes_sign_in
    @mfa_setup
    @requires("member")
    async def register_passkey() -> Response:
        form = await request.form
        try:
            device, codes = await mfa.finish_passkey_registration(
                ctx.spool,
                challenge_holder(),
                relying_party(ctx),
                _viewer().user.id,
                form.get("credential", ""),
                form.get("name", ""),
                ctx.now(),
            )
        except mfa.MfaError as error:
            await flash(str(error), "error")
            return see_other(ACCOUNT_PATH)
        await notify_change(ctx, mailer, _viewer().user, f"A passkey ({device.name}) was added")
        if codes is not None:
            return await _recovery_codes_page(codes, "Passkey added")
        await flash("Passkey added.", "success")
        return see_other(ACCOUNT_PATH)

    @bp.post(f"{ACCOUNT_PATH}/recovery-codes")
    @changes_sign_in
    @requires("member")
    async def regenerate_recovery_codes() -> Response:
        viewer = _viewer()
        if not mfa.user_has_mfa(ctx.spool, viewer.user.id):
            raise NotFound
        if not await reauthenticated(ctx, viewer.user, dict(await request.form)):
            await flash(
                "Enter your password or a current code to make new recovery codes.", "error"
            )
            return see_other(ACCOUNT_PATH)
        codes = await mfa.new_recovery_codes(ctx.spool, viewer.user.id, ctx.now())
        await notify_change(ctx, mailer, viewer.user, "New recovery codes were made")
        return await _recovery_codes_page(codes, "New recovery codes")

    @bp.post(f"{ACCOUNT_PATH}/devices/<device_id>/remove")
    @changes_sign_in
    @requires("member")
    async def remove_device(device_id: str) -> Response:
        viewer = _viewer()
        if mfa_devices.get_device(ctx.spool, viewer.user.id, device_id) is None:
            raise NotFound  # another user's device is none of this page's business
        if not await reauthenticated(ctx, viewer.user, dict(await request.form)):
            await flash("Enter your password or a current code to remove a device.", "error")
            return see_other(ACCOUNT_PATH)
        removed = await mfa.remove_device(ctx.spool, viewer.user.id, device_id)
        await notify_change(ctx, mailer, viewer.user, f"The device {removed.name!r} was removed")
        await flash(f"{removed.name} removed.", "success")
        return see_other(ACCOUNT_PATH)

    @bp.get("/team/mfa")
    async def team_mfa() -> str:
        viewer = _viewer()
        members = await mfa.members_without_mfa(ctx.spool, viewer.team.id)
        return await render_template(
            "mfa_team.html",
            require_mfa=viewer.policy.require_mfa,
            without_mfa=members,
            is_owner=viewer.role == "owner",
            viewer_has_mfa=await user_has_mfa_parked(ctx.spool, viewer.user.id),
        )

    @bp.post("/team/mfa")
    @requires("owner")
    async def set_team_mfa() -> Response:
        viewer = _viewer()
        required = (await request.form).get("require_mfa") == "on"
        await mfa.set_team_requires_mfa(
            ctx.spool, viewer.team.id, required, viewer.user.id, ctx.now()
        )
        if required:
            await flash("Every member of this team now needs a second factor.", "success")
        else:
            await flash("A second factor is now optional in this team.", "success")
        return see_other("/team/mfa")

    return bp
