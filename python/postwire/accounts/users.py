"""Users and their team memberships: what sign-in, invitations, SSO and the Team page call.

Every change commits in one batch with its indexes (the address index, both membership keys).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from postwire import _core
from postwire._core import WriteBatch
from postwire.concurrency import in_order
from postwire.errors import KeyExistsError, PostwireError
from postwire.store import users as store
from postwire.store.accounts import TEAMS, TeamRecord
from postwire.store.spool import Spool
from postwire.store.users import MembershipRecord, Role, UserRecord

# A user's teams, or a team's users, read at a time: their round trips to a table store on the
# network overlap.
TEAMS_READ_AT_ONCE: Final = 16


class EmailTakenError(PostwireError):
    """Another user already has this address."""


def iso_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def get_user(spool: Spool, user_id: str) -> UserRecord | None:
    return store.get_user(spool, user_id)


async def get_user_parked(spool: Spool, user_id: str) -> UserRecord | None:
    """`get_user`, parked rather than blocking on a table store on the network."""
    return await store.get_user_parked(spool, user_id)


def find_user_by_email(spool: Spool, email: str) -> UserRecord | None:
    user_id = store.find_user_id_by_email(spool, email)
    return None if user_id is None else store.get_user(spool, user_id)


async def create_user(
    spool: Spool,
    *,
    email: str,
    name: str,
    now: datetime,
    password_hash: str | None = None,
    email_verified: bool = False,
) -> UserRecord:
    """Create a user; raises EmailTakenError if the address belongs to someone already."""
    user = UserRecord(
        id=_core.new_id(),
        email=email.strip(),
        name=name.strip(),
        password_hash=password_hash,
        email_verified=email_verified,
        created_at=iso_timestamp(now),
    )
    batch = WriteBatch()
    store.put_user(batch, user)
    store.claim_email(batch, user.email, user.id)
    try:
        await spool.commit(batch)
    except KeyExistsError:
        raise EmailTakenError(f"{email} already has an account") from None
    return user


async def update_user(spool: Spool, user: UserRecord) -> UserRecord:
    """Store `user` (same address; the address changes by `confirm_email_change`)."""
    batch = WriteBatch()
    store.put_user(batch, user)
    await spool.commit(batch)
    return user


async def set_password_hash(spool: Spool, user: UserRecord, password_hash: str) -> UserRecord:
    return await update_user(spool, replace(user, password_hash=password_hash))


async def request_email_change(spool: Spool, user: UserRecord, email: str) -> UserRecord:
    """Note `email` as the address the user asks to move to. Nothing else changes until the
    link mailed to it is opened (`confirm_email_change`): an address nobody confirmed is no
    one's. EmailTakenError if an account has it."""
    if store.find_user_id_by_email(spool, email) is not None:
        raise EmailTakenError(f"{email} already has an account")
    return await update_user(spool, replace(user, pending_email=email.strip()))


def confirm_email_change(batch: WriteBatch, user: UserRecord) -> UserRecord:
    """Move the user to their pending address, confirmed (its link was opened); the batch
    fails with KeyExistsError if another account took the address meanwhile."""
    changed = replace(user, email=user.pending_email, pending_email="", email_verified=True)
    store.move_email(batch, user.id, user.email, changed.email)
    store.put_user(batch, changed)
    return changed


def memberships_of(spool: Spool, user: UserRecord) -> list[tuple[MembershipRecord, TeamRecord]]:
    """The user's memberships with their teams, by team name (teams deleted since are left out)."""
    memberships = store.memberships_of_user(spool, user.id)
    teams = [TEAMS.get(spool, membership.team_id) for membership in memberships]
    return _by_team_name(memberships, teams)


async def memberships_of_parked(
    spool: Spool, user: UserRecord
) -> list[tuple[MembershipRecord, TeamRecord]]:
    """`memberships_of`, parked rather than blocking on a table store on the network (the
    dashboard's guard, on every request): the teams are read together."""
    memberships = await store.memberships_of_user_parked(spool, user.id)

    async def team_of(membership: MembershipRecord) -> TeamRecord | None:
        return await TEAMS.aget(spool, membership.team_id)

    teams = await in_order(team_of, memberships, at_once=TEAMS_READ_AT_ONCE)
    return _by_team_name(memberships, teams)


def _by_team_name(
    memberships: list[MembershipRecord], teams: list[TeamRecord | None]
) -> list[tuple[MembershipRecord, TeamRecord]]:
    found = [(m, team) for m, team in zip(memberships, teams, strict=True) if team is not None]
    found.sort(key=lambda pair: (pair[1].name.lower(), pair[1].id))
    return found


def members_of(spool: Spool, team_id: str) -> list[tuple[MembershipRecord, UserRecord]]:
    """The team's members with their users, by address."""
    memberships = store.memberships_of_team(spool, team_id)
    found = [(m, store.get_user(spool, m.user_id)) for m in memberships]
    return _by_address(found)


async def members_of_parked(
    spool: Spool, team_id: str
) -> list[tuple[MembershipRecord, UserRecord]]:
    """`members_of`, parked rather than blocking on a table store on the network (the Team
    page): the users are read together."""
    memberships = await store.memberships_of_team_parked(spool, team_id)

    async def user_of(membership: MembershipRecord) -> UserRecord | None:
        return await store.get_user_parked(spool, membership.user_id)

    users = await in_order(user_of, memberships, at_once=TEAMS_READ_AT_ONCE)
    return _by_address(list(zip(memberships, users, strict=True)))


def _by_address(
    found: list[tuple[MembershipRecord, UserRecord | None]],
) -> list[tuple[MembershipRecord, UserRecord]]:
    members = [(membership, user) for membership, user in found if user is not None]
    members.sort(key=lambda pair: store.normalize_email(pair[1].email))
    return members


def get_membership(spool: Spool, user_id: str, team_id: str) -> MembershipRecord | None:
    return store.get_membership(spool, user_id, team_id)


async def add_membership(
    spool: Spool, user_id: str, team_id: str, role: Role, now: datetime
) -> MembershipRecord:
    """Make the user a member of the team with `role` (an existing membership keeps its date)."""
    existing = store.get_membership(spool, user_id, team_id)
    membership = MembershipRecord(
        team_id=team_id,
        user_id=user_id,
        role=role,
        created_at=existing.created_at if existing is not None else iso_timestamp(now),
    )
    batch = WriteBatch()
    store.put_membership(batch, membership)
    await spool.commit(batch)
    return membership


async def set_role(spool: Spool, membership: MembershipRecord, role: Role) -> MembershipRecord:
    changed = replace(membership, role=role)
    batch = WriteBatch()
    store.put_membership(batch, changed)
    await spool.commit(batch)
    return changed


async def remove_membership(spool: Spool, membership: MembershipRecord) -> None:
    batch = WriteBatch()
    store.delete_membership(batch, membership)
    await spool.commit(batch)


def team_policy(spool: Spool, team_id: str) -> store.TeamPolicyRecord:
    return store.get_team_policy(spool, team_id)


async def team_policy_parked(spool: Spool, team_id: str) -> store.TeamPolicyRecord:
    """`team_policy`, parked rather than blocking on a table store on the network."""
    return await store.get_team_policy_parked(spool, team_id)


async def set_team_policy(spool: Spool, policy: store.TeamPolicyRecord) -> None:
    batch = WriteBatch()
    store.put_team_policy(batch, policy)
    await spool.commit(batch)
