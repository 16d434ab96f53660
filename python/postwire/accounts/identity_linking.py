"""Who a provider's identity is here: an account found, joined to a team, or made.

Accounts are linked by verified address only: an address the provider does not vouch for is
refused, since anyone can type any address into an account at Google, GitHub or a team's
identity provider.

- Google and GitHub: the account with that address signs in (and its address counts as
  verified). No account: with `auth.signup = "open"` one is made, with a team of its own;
  with "invite_only" the person is told to accept their invitation first.
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
from postwire.store.invitations import pending_invitation_for
from postwire.store.spool import Spool
from postwire.store.sso import get_sso_config
from postwire.store.users import ROLES, Role, UserRecord, normalize_email

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
    if signup != "open":
        raise SignInRefused(
            f"No account uses {identity.email}. Accept your invitation from its email first;"
            f" then you can sign in with {who}."
        )
    user = await accounts_users.create_user(
        spool, email=identity.email, name=identity.name, now=now, email_verified=True
    )
    team = await create_team(spool, _team_name(identity), now)
    await accounts_users.add_membership(spool, user.id, team.id, "owner", now)
    return user


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
    role: Role = "member"
    if invitation is not None and invitation.role in ROLES:
        role = invitation.role
    await accounts_users.add_membership(spool, user.id, team_id, role, now)
    if invitation is not None:
        await invitations.revoke(spool, team_id, invitation.id)
    return user


async def _verified(spool: Spool, user: UserRecord) -> UserRecord:
    if user.email_verified:
        return user
    return await accounts_users.update_user(spool, replace(user, email_verified=True))


def _team_name(identity: Identity) -> str:
    return f"{identity.name or identity.email.partition('@')[0]}'s team"
