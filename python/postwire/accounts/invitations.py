"""Invitations to a team, by a link mailed to the address invited.

An invitation names an address and a role. Its link is single-use (`accounts.links`) and
works for 7 days. Opening it:
- a person without an account chooses a name and a password: the account is made with its
  address verified (the link proved it reaches them) and joins the team, in one commit with
  the link used and the invitation gone;
- a person with an account signs in as that address first, then joins.
Inviting an address again replaces its pending invitation (the old link stops working);
revoking deletes the invitation and its link.

Each invitation is mail sent from the operator's own sender to an address the team chose, so
invitations are counted per team and per invited address in each hour (`auth.invitations_per_*`),
re-invitations included, in the store before anything is made or sent (`claim_invitation`): a
burst, in one process or several, gets no more through than the limits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

from postwire import _core
from postwire._core import WriteBatch
from postwire.accounts.links import (
    INVITE_TTL,
    LinkRefused,
    check_link,
    link_url,
    new_link,
    redeem_link,
)
from postwire.accounts.system_mail import SystemMailer, invitation_mail
from postwire.accounts.users import EmailTakenError
from postwire.compose.addresses import is_address
from postwire.config import AuthConfig
from postwire.errors import KeyExistsError, PostwireError
from postwire.store import users as user_store
from postwire.store.accounts import TEAMS, TeamRecord, contract_timestamp
from postwire.store.invitations import (
    AuthLinkRecord,
    InvitationRecord,
    add_link,
    claim_invitation,
    delete_invitation,
    delete_link,
    get_invitation,
    get_link,
    pending_invitation_for,
    pending_invitations,
    put_invitation,
)
from postwire.store.spool import Spool
from postwire.store.users import (
    ROLES,
    MembershipRecord,
    UserRecord,
    normalize_email,
    role_at_least,
)

# A team's pending invitations at most: each one is a mail sent on the team's word.
MAX_PENDING: Final = 500


class InvitationError(PostwireError):
    """An invitation cannot be made or accepted; the message says why in plain words."""


@dataclass(frozen=True, slots=True)
class InvitationLimits:
    """Invitations allowed per hour: sent by one team, and received by one address."""

    per_team: int
    per_address: int

    @classmethod
    def of(cls, auth: AuthConfig) -> InvitationLimits:
        return cls(auth.invitations_per_team_per_hour, auth.invitations_per_address_per_hour)


DEFAULT_LIMITS: Final = InvitationLimits.of(AuthConfig())


@dataclass(frozen=True, slots=True)
class Invited:
    """An invitation made, its link, and whether the link was mailed (else only logged: the
    inviter is to pass it on)."""

    invitation: InvitationRecord
    link: str
    mailed: bool


@dataclass(frozen=True, slots=True)
class OpenInvitation:
    """What an invitation link leads to, checked but not used."""

    link: AuthLinkRecord
    invitation: InvitationRecord
    team: TeamRecord


def _iso(moment: datetime) -> str:
    """Dates of users and memberships as `accounts.users` writes them (ISO 8601, UTC)."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


async def invite(
    spool: Spool,
    mailer: SystemMailer,
    *,
    team: TeamRecord,
    email: str,
    role: str,
    inviter: UserRecord,
    inviter_role: str,
    public_url: str,
    now: datetime,
    limits: InvitationLimits = DEFAULT_LIMITS,
) -> Invited:
    """Invite `email` to `team` as `role` and mail the link (or log it: `SystemMailer`). An
    inviter grants no more than their own role, and must have verified their address (an
    invitation is mail sent on their word); past `limits` within the hour nothing is made."""
    address = email.strip()
    if not is_address(address):
        raise InvitationError(f"{address or 'That'} is not an email address.")
    if role not in ROLES:
        raise InvitationError("Choose the role member, admin or owner.")
    if not role_at_least(inviter_role, role):
        raise InvitationError(f"Only an owner can invite someone as {role}.")
    if not inviter.email_verified:
        raise InvitationError(
            "Confirm your own address before inviting anyone: open the link we mailed you, "
            "or ask for a new one on your Account page."
        )
    normalized = normalize_email(address)
    user_id = user_store.find_user_id_by_email(spool, normalized)
    if user_id is not None and user_store.get_membership(spool, user_id, team.id) is not None:
        raise InvitationError(f"{address} is a member of {team.name} already.")
    await _count(spool, team, normalized, address, limits, now)
    replaced = pending_invitation_for(spool, team.id, normalized)
    if replaced is None and len(pending_invitations(spool, team.id)) >= MAX_PENDING:
        raise InvitationError("This team has too many pending invitations: revoke some first.")
    invitation_id = _core.new_id()
    token, link = new_link(
        "invite",
        email=normalized,
        ttl=INVITE_TTL,
        now=now,
        team_id=team.id,
        invitation_id=invitation_id,
    )
    invitation = InvitationRecord(
        id=invitation_id,
        team_id=team.id,
        email=normalized,
        role=role,
        invited_by=inviter.id,
        link_lookup=link.lookup,
        created_at=contract_timestamp(now),
        expires_at_ms=link.expires_at_ms,
    )
    batch = WriteBatch()
    if replaced is not None:
        _drop(spool, batch, replaced)
    put_invitation(batch, invitation)
    add_link(spool, batch, link, int(now.timestamp() * 1000))
    await spool.commit(batch)
    url = link_url(public_url, "invite", token)
    # The inviter's verified address, not their name: a name is whatever they typed.
    mailed = await mailer.send(invitation_mail(address, team.name, inviter.email, role, url), now)
    return Invited(invitation, url, mailed)


async def _count(
    spool: Spool,
    team: TeamRecord,
    normalized: str,
    address: str,
    limits: InvitationLimits,
    now: datetime,
) -> None:
    """Count the invitation; `InvitationError` past either limit."""
    now_ms = int(now.timestamp() * 1000)
    refused = await claim_invitation(
        spool, team.id, normalized, now_ms, per_team=limits.per_team, per_address=limits.per_address
    )
    if refused is None:
        return
    until = datetime.fromtimestamp(refused.window_end_ms / 1000, UTC).strftime("%H:%M UTC")
    if refused.limit == "team":
        raise InvitationError(
            f"This team has sent {limits.per_team} invitations within the hour, the most "
            f"allowed: try again after {until}."
        )
    raise InvitationError(
        f"Too many invitations went to {address} within the hour: try again after {until}."
    )


def _drop(spool: Spool, batch: WriteBatch, invitation: InvitationRecord) -> None:
    delete_invitation(batch, invitation)
    link = get_link(spool, invitation.link_lookup)
    if link is not None:
        delete_link(batch, link)


def list_pending(spool: Spool, team_id: str) -> list[InvitationRecord]:
    return pending_invitations(spool, team_id)


async def revoke(spool: Spool, team_id: str, invitation_id: str) -> InvitationRecord | None:
    """Delete the team's invitation and its link; None if there is no such invitation (of
    this team: an id of another team's invitation finds nothing)."""
    invitation = get_invitation(spool, team_id, invitation_id)
    if invitation is None:
        return None
    batch = WriteBatch()
    _drop(spool, batch, invitation)
    await spool.commit(batch)
    return invitation


def open_invitation(spool: Spool, token: str, now: datetime) -> OpenInvitation:
    """The invitation a link leads to; `LinkRefused` if the link or invitation is gone."""
    link = check_link(spool, token, ("invite",), now)
    invitation = None
    if link.team_id is not None and link.invitation_id is not None:
        invitation = get_invitation(spool, link.team_id, link.invitation_id)
    team = None if invitation is None else TEAMS.get(spool, invitation.team_id)
    if invitation is None or team is None:
        raise LinkRefused
    return OpenInvitation(link, invitation, team)


def _membership(invitation: InvitationRecord, user_id: str, now: datetime) -> MembershipRecord:
    return MembershipRecord(
        team_id=invitation.team_id,
        user_id=user_id,
        role=invitation.role,
        created_at=_iso(now),
    )


async def accept_as_user(
    spool: Spool, token: str, user: UserRecord, now: datetime
) -> MembershipRecord:
    """A signed-in user accepts: joins the team if the invitation is for their address (a
    member already keeps the role they have). Their address counts as verified: the link
    reached it."""
    async with redeem_link(spool, token, ("invite",), now) as redemption:
        opened = open_invitation(spool, token, now)
        if normalize_email(user.email) != opened.invitation.email:
            raise InvitationError(
                f"This invitation is for {opened.invitation.email}; you are signed in as "
                f"{user.email}. Sign out and sign in as {opened.invitation.email} to accept it."
            )
        current = user_store.get_membership(spool, user.id, opened.team.id)
        membership = current or _membership(opened.invitation, user.id, now)
        user_store.put_membership(redemption.batch, membership)
        delete_invitation(redemption.batch, opened.invitation)
        if not user.email_verified:
            user_store.put_user(redemption.batch, replace(user, email_verified=True))
    return membership


async def accept_as_new_user(
    spool: Spool, token: str, *, name: str, password_hash: str, now: datetime
) -> tuple[UserRecord, MembershipRecord]:
    """A person without an account accepts: the account is made (address verified) and joins
    the team. `EmailTakenError` if the address has an account (made meanwhile)."""
    if not name.strip():
        raise InvitationError("Enter your name.")
    try:
        async with redeem_link(spool, token, ("invite",), now) as redemption:
            opened = open_invitation(spool, token, now)
            user = UserRecord(
                id=_core.new_id(),
                email=opened.invitation.email,
                name=name.strip()[:200],
                password_hash=password_hash,
                email_verified=True,
                created_at=_iso(now),
            )
            membership = _membership(opened.invitation, user.id, now)
            user_store.put_user(redemption.batch, user)
            user_store.claim_email(redemption.batch, user.email, user.id)
            user_store.put_membership(redemption.batch, membership)
            delete_invitation(redemption.batch, opened.invitation)
    except KeyExistsError:
        raise EmailTakenError(f"{opened.invitation.email} already has an account") from None
    return user, membership
