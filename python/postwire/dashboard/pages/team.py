"""The Team page (members, roles, invitations, the team's name) and the invitation link's page.

Who may do what is declared on each view and enforced by the request guard: members read,
admins invite and revoke, owners change roles, remove members and rename the team; anyone
signed in may leave. Every id in a URL is looked up within the viewer's team.
"""

from __future__ import annotations

from datetime import datetime

from quart import Blueprint, Response, flash, g, render_template, request
from werkzeug.exceptions import NotFound

from postwire.accounts import mfa, users
from postwire.accounts.invitations import (
    InvitationError,
    InvitationLimits,
    Invited,
    OpenInvitation,
    accept_as_new_user,
    accept_as_user,
    invite,
    open_invitation,
    revoke,
)
from postwire.accounts.links import LinkRefused
from postwire.accounts.passwords import hash_password, password_problem
from postwire.accounts.sessions import switch_team
from postwire.accounts.system_mail import SystemMailer
from postwire.accounts.team_members import (
    MembershipRefused,
    change_role,
    remove_member,
    rename_team,
)
from postwire.accounts.users import EmailTakenError
from postwire.dashboard.access import public, requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import LoginRefused, finish_login, session_admits_team
from postwire.dashboard.redirects import see_other
from postwire.dashboard.viewer import Viewer
from postwire.store.invitations import pending_invitations_parked
from postwire.store.users import ROLES, normalize_email


def _viewer() -> Viewer:
    viewer: Viewer = g.viewer
    return viewer


def _expires_text(expires_at_ms: int, now: datetime) -> str:
    remaining = expires_at_ms / 1000 - now.timestamp()
    if remaining <= 0:
        return "expired"
    days, hours = int(remaining // 86400), int(remaining % 86400 // 3600)
    return f"expires in {days} d {hours} h" if days else f"expires in {hours} h"


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("team", __name__)
    mailer = SystemMailer(ctx.config, ctx.spool, ctx.delivery)
    public_url = ctx.config.dashboard.public_url

    invitation_limits = InvitationLimits.of(ctx.config.auth)

    @blueprint.get("/team")
    async def team_page() -> str:
        return await render_team()

    async def render_team(unsent: Invited | None = None) -> str:
        """The Team page; with `unsent`, the link of an invitation no mail carried, to copy."""
        viewer = _viewer()
        now = ctx.now()
        members = await users.members_of_parked(ctx.spool, viewer.team.id)
        pending = [
            (invitation, _expires_text(invitation.expires_at_ms, now))
            for invitation in await pending_invitations_parked(ctx.spool, viewer.team.id)
        ]
        owners = sum(1 for membership, _ in members if membership.role == "owner")
        has_mfa = await mfa.with_mfa(ctx.spool, [user for _, user in members])
        with_mfa = {user.id for (_, user), has in zip(members, has_mfa, strict=True) if has}
        return await render_template(
            "team.html",
            members=members,
            pending=pending,
            owners=owners,
            with_mfa=with_mfa,
            roles=ROLES[::-1],
            can_invite=viewer.role in ("owner", "admin"),
            is_owner=viewer.role == "owner",
            unsent=unsent,
        )

    async def back_to_team(message: str, category: str = "error") -> Response:
        await flash(message, category)
        return see_other("/team")

    @blueprint.post("/team/name")
    @requires("owner")
    async def rename() -> Response:
        form = await request.form
        try:
            await rename_team(ctx.spool, _viewer().team, form.get("name", ""))
        except MembershipRefused as refusal:
            return await back_to_team(str(refusal))
        return await back_to_team("The team's name was changed.", "success")

    @blueprint.post("/team/invitations")
    async def create_invitation() -> Response | str:
        viewer = _viewer()
        form = await request.form
        email = form.get("email", "").strip()
        try:
            invited = await invite(
                ctx.spool,
                mailer,
                team=viewer.team,
                email=email,
                role=form.get("role", "member"),
                inviter=viewer.user,
                inviter_role=viewer.role,
                public_url=public_url,
                now=ctx.now(),
                limits=invitation_limits,
            )
        except InvitationError as refusal:
            return await back_to_team(str(refusal))
        if not invited.mailed:
            # Shown once, in this answer alone: the link is a secret, kept hashed.
            return await render_team(invited)
        return await back_to_team(f"An invitation was sent to {email}.", "success")

    @blueprint.post("/team/invitations/<invitation_id>/revoke")
    async def revoke_invitation(invitation_id: str) -> Response:
        revoked = await revoke(ctx.spool, _viewer().team.id, invitation_id)
        if revoked is None:
            raise NotFound
        return await back_to_team(f"The invitation of {revoked.email} was revoked.", "success")

    def member_address(user_id: str) -> str:
        """The address of a member of the viewer's team; 404 for anyone else."""
        member = users.get_user(ctx.spool, user_id)
        if member is None or users.get_membership(ctx.spool, user_id, _viewer().team.id) is None:
            raise NotFound
        return member.email

    @blueprint.post("/team/members/<user_id>/role")
    @requires("owner")
    async def set_member_role(user_id: str) -> Response:
        address = member_address(user_id)
        form = await request.form
        try:
            changed = await change_role(ctx.spool, _viewer().team.id, user_id, form.get("role", ""))
        except MembershipRefused as refusal:
            return await back_to_team(str(refusal))
        return await back_to_team(f"{address} is now {changed.role}.", "success")

    @blueprint.post("/team/members/<user_id>/remove")
    @requires("owner")
    async def remove(user_id: str) -> Response:
        address = member_address(user_id)
        try:
            await remove_member(ctx.spool, _viewer().team.id, user_id)
        except MembershipRefused as refusal:
            return await back_to_team(str(refusal))
        return await back_to_team(f"{address} was removed from the team.", "success")

    @blueprint.post("/team/leave")
    @requires("member")
    async def leave() -> Response:
        viewer = _viewer()
        try:
            await remove_member(ctx.spool, viewer.team.id, viewer.user.id, leaving=True)
        except MembershipRefused as refusal:
            return await back_to_team(str(refusal))
        await flash(f"You left {viewer.team.name}.", "success")
        return see_other("/account")

    async def invitation_page(
        token: str, opened: OpenInvitation | None, error: str | None = None, status: int = 200
    ) -> tuple[str, int]:
        viewer: Viewer | None = g.get("viewer")
        has_account = opened is not None and (
            users.find_user_by_email(ctx.spool, opened.invitation.email) is not None
        )
        signed_in_as_invited = (
            viewer is not None
            and opened is not None
            and normalize_email(viewer.user.email) == opened.invitation.email
        )
        page = await render_template(
            "invite.html",
            token=token,
            opened=opened,
            error=error,
            has_account=has_account,
            signed_in_as_invited=signed_in_as_invited,
            login_url=f"/login?next=/invite/{token}",
        )
        return page, status

    @blueprint.get("/invite/<token>")
    @public
    async def invitation(token: str) -> tuple[str, int]:
        try:
            opened = open_invitation(ctx.spool, token, ctx.now())
        except LinkRefused as refusal:
            return await invitation_page(token, None, str(refusal), 410)
        return await invitation_page(token, opened)

    @blueprint.post("/invite/<token>")
    @public
    async def accept_invitation(token: str) -> Response | tuple[str, int]:
        viewer: Viewer | None = g.get("viewer")
        now = ctx.now()
        try:
            opened = open_invitation(ctx.spool, token, now)
        except LinkRefused as refusal:
            return await invitation_page(token, None, str(refusal), 410)
        if viewer is not None and viewer.session.mfa_pending:
            refusal_text = "Finish signing in (your second factor) first, then open the link again."
            return await invitation_page(token, opened, refusal_text, 400)
        if viewer is not None:
            try:
                membership = await accept_as_user(ctx.spool, token, viewer.user, now)
            except (InvitationError, LinkRefused) as refusal:
                return await invitation_page(token, opened, str(refusal), 400)
            if not session_admits_team(ctx, membership, viewer.session):
                await flash(
                    f"You joined {opened.team.name}. It admits single sign-on only: sign in "
                    "through its identity provider to see it.",
                    "success",
                )
                return see_other("/team")
            await switch_team(ctx.spool, viewer.session, membership.team_id)
            await flash(f"You joined {opened.team.name}.", "success")
            return see_other("/team")
        form = await request.form
        password = form.get("password", "")
        problem = password_problem(password)
        if problem is None and password != form.get("password_confirm", ""):
            problem = "The two passwords differ."
        if problem is not None:
            return await invitation_page(token, opened, problem, 400)
        try:
            user, membership = await accept_as_new_user(
                ctx.spool,
                token,
                name=form.get("name", ""),
                password_hash=await hash_password(password),
                now=now,
            )
        except EmailTakenError:
            return await invitation_page(
                token, opened, "This address has an account: sign in to accept.", 409
            )
        except (InvitationError, LinkRefused) as refusal:
            return await invitation_page(token, opened, str(refusal), 400)
        try:
            return await finish_login(
                ctx, user, method="password", next_url="/emails", team_id=membership.team_id
            )
        except LoginRefused as refusal:  # the team admits single sign-on only
            await flash(f"Your account is ready. {refusal.message}", "error")
            return see_other("/login")

    return blueprint
