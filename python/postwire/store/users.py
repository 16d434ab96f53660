"""People who sign in to the dashboard, the addresses that find them, their team memberships
and each team's sign-in policy.

Tables:
    users         `{user_id}` -> UserRecord
    user_emails   `{normalized address}` -> UserEmailRecord (finds a user by address; unique)
    memberships   `user/{user_id}/{team_id}` and `team/{team_id}/{user_id}` -> MembershipRecord
                  (both written in one batch: a user's teams and a team's members, each a scan);
                  `policy/{team_id}` -> TeamPolicyRecord
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

Role = Literal["owner", "admin", "member"]
ROLES: Final[tuple[Role, ...]] = ("member", "admin", "owner")  # weakest first


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: str
    email: str  # as the person typed it; found through its normalized form
    name: str
    # Argon2id encoded hash; None for a user who signs in only through Google, GitHub or SSO,
    # or who has not yet set a password.
    password_hash: str | None
    email_verified: bool
    created_at: str  # ISO 8601, UTC
    # An address the user asked to move to, not yet confirmed: it stays unclaimed (not in
    # `user_emails`) and the account keeps `email` until the link mailed to it is opened.
    pending_email: str = ""


@dataclass(frozen=True, slots=True)
class UserEmailRecord:
    user_id: str


@dataclass(frozen=True, slots=True)
class MembershipRecord:
    team_id: str
    user_id: str
    role: str  # a Role
    created_at: str


@dataclass(frozen=True, slots=True)
class TeamPolicyRecord:
    team_id: str
    require_mfa: bool = False  # SSO enforcement lives with the team's SSO settings (store/sso.py)


USERS: Final = Table("users", UserRecord)
USER_EMAILS: Final = Table("user_emails", UserEmailRecord)
MEMBERSHIPS: Final = Table("memberships", MembershipRecord)
TEAM_POLICIES: Final = Table("memberships", TeamPolicyRecord)

_ALL: Final = 1_000_000


def normalize_email(email: str) -> str:
    """The form an address is looked up by: trimmed, lower case (domains are case-insensitive,
    and no mail system in use treats local parts differently by case)."""
    return email.strip().lower()


def role_at_least(role: str, needed: str) -> bool:
    """Whether `role` carries the rights of `needed` (owner > admin > member)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


def get_user(spool: Spool, user_id: str) -> UserRecord | None:
    return USERS.get(spool, user_id)


async def get_user_parked(spool: Spool, user_id: str) -> UserRecord | None:
    """`get_user`, parked rather than blocking on a table store on the network."""
    return await USERS.aget(spool, user_id)


def find_user_id_by_email(spool: Spool, email: str) -> str | None:
    entry = USER_EMAILS.get(spool, normalize_email(email))
    return None if entry is None else entry.user_id


def put_user(batch: WriteBatch, user: UserRecord) -> None:
    USERS.put(batch, user.id, user)


def claim_email(batch: WriteBatch, email: str, user_id: str) -> None:
    """Index `email` to the user; the batch fails with KeyExistsError if it is taken."""
    USER_EMAILS.insert(batch, normalize_email(email), UserEmailRecord(user_id))


def release_email(batch: WriteBatch, email: str) -> None:
    USER_EMAILS.delete(batch, normalize_email(email))


def move_email(batch: WriteBatch, user_id: str, old: str, new: str) -> None:
    """Index the user at `new` instead of `old` (nothing if they are one address); the batch
    fails with KeyExistsError if `new` is taken."""
    if normalize_email(new) != normalize_email(old):
        claim_email(batch, new, user_id)
        release_email(batch, old)


def _by_user(user_id: str, team_id: str) -> str:
    return f"user/{user_id}/{team_id}"


def _by_team(team_id: str, user_id: str) -> str:
    return f"team/{team_id}/{user_id}"


def get_membership(spool: Spool, user_id: str, team_id: str) -> MembershipRecord | None:
    return MEMBERSHIPS.get(spool, _by_user(user_id, team_id))


def put_membership(batch: WriteBatch, membership: MembershipRecord) -> None:
    MEMBERSHIPS.put(batch, _by_user(membership.user_id, membership.team_id), membership)
    MEMBERSHIPS.put(batch, _by_team(membership.team_id, membership.user_id), membership)


def delete_membership(batch: WriteBatch, membership: MembershipRecord) -> None:
    MEMBERSHIPS.delete(batch, _by_user(membership.user_id, membership.team_id))
    MEMBERSHIPS.delete(batch, _by_team(membership.team_id, membership.user_id))


def memberships_of_user(spool: Spool, user_id: str) -> list[MembershipRecord]:
    return [m for _, m in MEMBERSHIPS.scan(spool, prefix=f"user/{user_id}/", limit=_ALL)]


async def memberships_of_user_parked(spool: Spool, user_id: str) -> list[MembershipRecord]:
    """`memberships_of_user`, parked rather than blocking on a table store on the network."""
    rows = await MEMBERSHIPS.ascan(spool, prefix=f"user/{user_id}/", limit=_ALL)
    return [m for _, m in rows]


def memberships_of_team(spool: Spool, team_id: str) -> list[MembershipRecord]:
    return [m for _, m in MEMBERSHIPS.scan(spool, prefix=f"team/{team_id}/", limit=_ALL)]


async def memberships_of_team_parked(spool: Spool, team_id: str) -> list[MembershipRecord]:
    """`memberships_of_team`, parked rather than blocking on a table store on the network."""
    rows = await MEMBERSHIPS.ascan(spool, prefix=f"team/{team_id}/", limit=_ALL)
    return [m for _, m in rows]


def get_team_policy(spool: Spool, team_id: str) -> TeamPolicyRecord:
    """The team's sign-in policy; a team that never set one requires nothing."""
    return TEAM_POLICIES.get(spool, f"policy/{team_id}") or TeamPolicyRecord(team_id)


async def get_team_policy_parked(spool: Spool, team_id: str) -> TeamPolicyRecord:
    """`get_team_policy`, parked rather than blocking on a table store on the network."""
    return await TEAM_POLICIES.aget(spool, f"policy/{team_id}") or TeamPolicyRecord(team_id)


def put_team_policy(batch: WriteBatch, policy: TeamPolicyRecord) -> None:
    TEAM_POLICIES.put(batch, f"policy/{policy.team_id}", policy)
