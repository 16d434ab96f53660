"""Who a provider's identity is here: an account found, joined to a team, or made.

An identity is bound to what vouched for it:

- Google and GitHub (configured by the operator) vouch for addresses, instance-wide. The
  account with that address signs in, if its address was confirmed: an account whose address
  nobody confirmed may be anyone's (open sign-up takes any address), so a provider vouching
  for the address proves nothing about who made the account, and the sign-in is refused with
  the way forward (sign in with the password and confirm the address). No account: one is made
  if the address has pending invitations (it joins those teams with the invited roles, as
  accepting each link would) or, failing that, if `auth.signup = "open"` (with a team of its
  own); otherwise the sign-in is refused.
- A team's SSO provider is chosen by the team's owner, so it vouches for that team alone. Its
  identity is `(team, issuer, subject)`, linked to one account (`store/sso_identities.py`):
  - a linked identity signs in to its account, for that team only (a membership of the team
    is made only from a pending invitation or the team's verified email domains);
  - an unlinked identity never opens an existing account, except one whose confirmed address
    lies under one of the team's verified email domains (the team could receive its mail);
    otherwise the account's owner links it, signed in (`link_team_identity`) or by giving
    the account's password at that sign-in (`link_proven_by_owner`);
  - a new address gets a new account, member of that team alone, if it was invited to the
    team or lies under the team's domains. Its address counts as confirmed only in the second
    case: an invitation's address asserted by the team's own provider reached no mailbox.
"""

from __future__ import annotations

from datetime import datetime

from postwire._core import WriteBatch
from postwire.accounts import invitations
from postwire.accounts import users as accounts_users
from postwire.accounts.oidc import Identity
from postwire.domains.store import find_verified_domain_for_sender
from postwire.errors import KeyExistsError
from postwire.store.accounts import create_team
from postwire.store.invitations import (
    PENDING_BY_EMAIL,
    InvitationRecord,
    get_invitation,
    pending_invitation_for,
)
from postwire.store.spool import Spool
from postwire.store.sso import get_sso_config
from postwire.store.sso_identities import (
    SsoIdentityRecord,
    get_sso_identity,
    insert_sso_identity,
)
from postwire.store.users import ROLES, Role, UserRecord, normalize_email

# Pending invitations read at most when looking for an address's (all teams together).
MAX_PENDING_SCANNED = 10_000
PROVIDER_NAMES = {"google": "Google", "github": "GitHub", "oidc": "Your identity provider"}


class SignInRefused(Exception):
    """The provider proved an identity that may not sign in here; the text says why."""


class UnlinkedAccount(SignInRefused):
    """The team's provider names the address of an existing account it was never linked to:
    only that account's owner can link it."""


def _unconfirmed_refusal(who: str, email: str) -> SignInRefused:
    return SignInRefused(
        f"An account with the address {email} exists, but its address was never confirmed,"
        f" so {who} cannot sign in to it. If the account is yours, sign in with its password"
        " and open the confirmation link we mail to the address; then this way of signing in"
        " works too. If you never made it, choose “Forgot password” on the login page."
    )


def _require_verified(who: str, identity: Identity) -> None:
    if not identity.email_verified:
        raise SignInRefused(
            f"{who} has not verified the address {identity.email}. Verify it there, then sign"
            " in again."
        )


async def account_for_identity(
    spool: Spool, identity: Identity, *, provider: str, signup: str, now: datetime
) -> UserRecord:
    """The account a Google or GitHub `identity` signs in to, made as the rules say."""
    who = PROVIDER_NAMES.get(provider, "The identity provider")
    _require_verified(who, identity)
    user = accounts_users.find_user_by_email(spool, identity.email)
    if user is not None:
        if not user.email_verified:
            raise _unconfirmed_refusal(who, identity.email)
        return user
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


async def account_for_team_identity(
    spool: Spool, identity: Identity, team_id: str, *, now: datetime
) -> UserRecord:
    """The account the team's provider signs `identity` in to (for that team only)."""
    _require_verified(PROVIDER_NAMES["oidc"], identity)
    link = get_sso_identity(spool, team_id, identity.issuer, identity.subject)
    linked = None if link is None else accounts_users.get_user(spool, link.user_id)
    if linked is not None:
        return await _member_of_team(spool, identity, linked, team_id, now, in_domain=None)
    in_domain = _under_team_domain(spool, team_id, identity.email)
    user = accounts_users.find_user_by_email(spool, identity.email)
    if user is not None:
        if not in_domain:
            raise UnlinkedAccount(
                f"An account with the address {identity.email} already exists, and this team's"
                " identity provider was never linked to it. Only the account's owner can link"
                " it: with the account's password here, or signed in, from the Account page."
            )
        if not user.email_verified:
            raise _unconfirmed_refusal("this team's identity provider", identity.email)
    elif in_domain or _live_team_invitation(spool, team_id, identity.email, now) is not None:
        user = await accounts_users.create_user(
            spool, email=identity.email, name=identity.name, now=now, email_verified=in_domain
        )
    else:
        raise _not_a_member(identity)
    user = await _linked(spool, identity, team_id, user, now)
    return await _member_of_team(spool, identity, user, team_id, now, in_domain=in_domain)


async def link_team_identity(
    spool: Spool, identity: Identity, team_id: str, user: UserRecord, *, now: datetime
) -> UserRecord:
    """Link the team provider's `identity` to `user`, whose owner is signed in and asked for it
    (they must be a member of the team: the link opens that membership, nothing else)."""
    if accounts_users.get_membership(spool, user.id, team_id) is None:
        raise SignInRefused("You are not a member of this team, so its sign-in cannot be linked.")
    return await _linked_to(spool, identity, team_id, user, now)


async def link_proven_by_owner(
    spool: Spool, identity: Identity, team_id: str, user: UserRecord, *, now: datetime
) -> UserRecord:
    """Link the team provider's `identity` to `user`, whose owner just proved the account is
    theirs (its password), then sign in as the team's rules say. Only a member of the team, or
    someone it invited, can be linked: the link opens that membership, nothing else."""
    member = accounts_users.get_membership(spool, user.id, team_id) is not None
    if not member and _live_team_invitation(spool, team_id, identity.email, now) is None:
        raise _not_a_member(identity)
    await _linked_to(spool, identity, team_id, user, now)
    return await account_for_team_identity(spool, identity, team_id, now=now)


async def _linked_to(
    spool: Spool, identity: Identity, team_id: str, user: UserRecord, now: datetime
) -> UserRecord:
    """Link the identity to `user`, whose owner asked; refused if it is another account's."""
    linked = await _linked(spool, identity, team_id, user, now)
    if linked.id != user.id:
        raise SignInRefused(
            "This identity of the team's provider is linked to another account already."
        )
    return linked


async def _linked(
    spool: Spool, identity: Identity, team_id: str, user: UserRecord, now: datetime
) -> UserRecord:
    """Link the identity to `user`; if it is linked already (a sign-in at the same moment),
    the account it is linked to."""
    if not identity.issuer or not identity.subject:
        raise SignInRefused("The identity provider gave no issuer or subject for this person.")
    record = SsoIdentityRecord(
        team_id=team_id,
        issuer=identity.issuer,
        subject=identity.subject,
        user_id=user.id,
        email=identity.email,
        created_at=now.isoformat(),
    )
    batch = WriteBatch()
    insert_sso_identity(batch, record)
    try:
        await spool.commit(batch)
    except KeyExistsError:
        existing = get_sso_identity(spool, team_id, identity.issuer, identity.subject)
        found = None if existing is None else accounts_users.get_user(spool, existing.user_id)
        if found is None:
            raise SignInRefused("This sign-in could not be linked. Try again.") from None
        return found
    return user


async def _member_of_team(
    spool: Spool,
    identity: Identity,
    user: UserRecord,
    team_id: str,
    now: datetime,
    *,
    in_domain: bool | None,
) -> UserRecord:
    """`user`, a member of the team: already, or by the team's pending invitation of the
    identity's address, or by the team's verified email domains; else refused."""
    if accounts_users.get_membership(spool, user.id, team_id) is not None:
        return user
    invitation = _live_team_invitation(spool, team_id, identity.email, now)
    if invitation is not None:
        await _join_as_invited(spool, user, invitation, now)
        return user
    if in_domain is None:
        in_domain = _under_team_domain(spool, team_id, identity.email)
    if not in_domain:
        raise _not_a_member(identity)
    await accounts_users.add_membership(spool, user.id, team_id, "member", now)
    return user


def _not_a_member(identity: Identity) -> SignInRefused:
    return SignInRefused(
        f"{identity.email} is not a member of this team. Ask its owner for an invitation."
    )


def _under_team_domain(spool: Spool, team_id: str, email: str) -> bool:
    """Whether the address lies under one of the team's SSO email domains that the team still
    has verified (a domain it no longer proves it owns speaks for no one)."""
    config = get_sso_config(spool, team_id)
    domain = normalize_email(email).rpartition("@")[2]
    if config is None or domain not in config.email_domains:
        return False
    return find_verified_domain_for_sender(spool, team_id, domain) is not None


def _live_team_invitation(
    spool: Spool, team_id: str, email: str, now: datetime
) -> InvitationRecord | None:
    invitation = pending_invitation_for(spool, team_id, normalize_email(email))
    if invitation is None or invitation.expires_at_ms <= now.timestamp() * 1000:
        return None
    return invitation


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


def _team_name(identity: Identity) -> str:
    return f"{identity.name or identity.email.partition('@')[0]}'s team"
