"""Who a provider's identity is here: an account found, joined to a team, or made.

Accounts are linked by verified address only: an address the provider does not vouch for is
refused, since anyone can type any address into an account at Google, GitHub or a team's
identity provider.

- Google and GitHub: the account with that address signs in (and its address counts as
  verified). No account: one is made if the address has pending invitations (it joins those
  teams with the invited roles, as accepting each link would) or, failing that, if
  `auth.signup = "open"` (with a team of its own); otherwise the sign-in is refused.
- A team's SSO speaks for its members and for addresses under the team's verified email
  domains: a member signs in; someone with a pending invitation to the team joins it with the
  invited role; an address under one of the team's SSO domains joins as a member (an account
  is made if needed: just-in-time provisioning). Anyone else is refused, so a team's provider
  cannot sign in people who have nothing to do with the team.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from postwire.accounts import invitations
from postwire.accounts import users as accounts_users
from postwire.accounts.oidc import Identity
from postwire.store.accounts import create_team
from postwire.store.invitations import (
    PENDING_BY_EMAIL,
    InvitationRecord,
    get_invitation,
    pending_invitation_for,
)
from postwire.store.spool import Spool
from postwire.store.sso import get_sso_config
from postwire.store.users import ROLES, Role, UserRecord, normalize_email

# Pending invitations read at most when looking for an address's (all teams together).
MAX_PENDING_SCANNED = 10_000
PROVIDER_NAMES = {"google": "Google", "github": "GitHub", "oidc": "Your identity provider"}


class SignInRefused(Exception):
    """The provider proved an identity that may not sign in here; the text says why."""


async def account_for_identity(
    spool: Spool,
    identity: Identity,
    *,
    provider: str,
    team_id: str | None,
    signup: str,
    now: datetime,
) -> UserRecord:
    """The account `identity` signs in to, made or joined to the team as the rules say."""
    who = PROVIDER_NAMES.get(provider, "The identity provider")
    if not identity.email_verified:
        raise SignInRefused(
            f"{who} has not verified the address {identity.email}. Verify it there, then sign"
            " in again."
        )
    user = accounts_users.find_user_by_email(spool, identity.email)
    if team_id is not None:
        return await _team_member(spool, identity, user, team_id, now)
    if user is not None:
        return await _verified(spool, user)
    invited = _live_invitations_of(spool, normalize_email(identity.email), now)
    if signup != "open" and not invited:
        raise SignInRefused(
            f"No account uses {identity.email}, and it has no pending invitation. Ask a team's"
            " owner to invite you."
        )
    user = await accounts_users.create_user(
        spool, email=identity.email, name=identity.name, now=now, email_verified=True
    )
    # The provider proved the invited address, as the invitation's link would have.
    for invitation in invited:
        await _join_as_invited(spool, user, invitation, now)
    if not invited:
        team = await create_team(spool, _team_name(identity), now)
        await accounts_users.add_membership(spool, user.id, team.id, "owner", now)
    return user


def _live_invitations_of(spool: Spool, email: str, now: datetime) -> list[InvitationRecord]:
    """The address's unexpired invitations, whatever the team. The pending index is keyed by
    team first, so this is a bounded scan; it runs only for an address without an account."""
    suffix = f"/{email}"
    found = []
    for key, entry in PENDING_BY_EMAIL.scan(spool, prefix="pending/", limit=MAX_PENDING_SCANNED):
        if not key.endswith(suffix):
            continue
        team_id = key[len("pending/") : -len(suffix)]
        invitation = get_invitation(spool, team_id, entry.invitation_id)
        if invitation is not None and invitation.expires_at_ms > now.timestamp() * 1000:
            found.append(invitation)
    return found


async def _join_as_invited(
    spool: Spool, user: UserRecord, invitation: InvitationRecord, now: datetime
) -> None:
    role: Role = "member"
    if invitation.role in ROLES:
        role = invitation.role
    await accounts_users.add_membership(spool, user.id, invitation.team_id, role, now)
    await invitations.revoke(spool, invitation.team_id, invitation.id)


async def _team_member(
    spool: Spool, identity: Identity, user: UserRecord | None, team_id: str, now: datetime
) -> UserRecord:
    if user is not None and accounts_users.get_membership(spool, user.id, team_id) is not None:
        return await _verified(spool, user)
    invitation = pending_invitation_for(spool, team_id, normalize_email(identity.email))
    if invitation is not None and invitation.expires_at_ms <= now.timestamp() * 1000:
        invitation = None
    config = get_sso_config(spool, team_id)
    domain = identity.email.rpartition("@")[2]
    in_team_domain = config is not None and domain in config.email_domains
    if invitation is None and not in_team_domain:
        raise SignInRefused(
            f"{identity.email} is not a member of this team. Ask its owner for an invitation."
        )
    if user is None:
        user = await accounts_users.create_user(
            spool, email=identity.email, name=identity.name, now=now, email_verified=True
        )
    else:
        user = await _verified(spool, user)
    if invitation is not None:
        await _join_as_invited(spool, user, invitation, now)
    else:
        await accounts_users.add_membership(spool, user.id, team_id, "member", now)
    return user


async def _verified(spool: Spool, user: UserRecord) -> UserRecord:
    if user.email_verified:
        return user
    return await accounts_users.update_user(spool, replace(user, email_verified=True))


def _team_name(identity: Identity) -> str:
    return f"{identity.name or identity.email.partition('@')[0]}'s team"
