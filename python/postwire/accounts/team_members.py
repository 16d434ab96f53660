"""A team's members as its owners manage them: roles, removal, leaving, the team's name.

A team always keeps an owner: the last one can be neither demoted, removed nor leave. Changes
of membership take the team's owners lock (`Spool.guarded`), so two owners demoting each
other at once cannot leave the team with none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from postwire._core import WriteBatch
from postwire.errors import PostwireError
from postwire.store import users as user_store
from postwire.store.accounts import TEAMS, TeamRecord
from postwire.store.spool import Spool
from postwire.store.users import ROLES, MembershipRecord

MAX_TEAM_NAME: Final = 100


class MembershipRefused(PostwireError):
    """The change would break a rule of the team; the message says which, plainly."""


def _owners_lock(team_id: str) -> str:
    return f"memberships/owners/{team_id}"


def _owners(spool: Spool, team_id: str) -> list[MembershipRecord]:
    return [m for m in user_store.memberships_of_team(spool, team_id) if m.role == "owner"]


def _member(spool: Spool, team_id: str, user_id: str) -> MembershipRecord:
    membership = user_store.get_membership(spool, user_id, team_id)
    if membership is None:
        raise MembershipRefused("That person is not a member of this team.")
    return membership


def _keep_an_owner(spool: Spool, membership: MembershipRecord, leaving: str) -> None:
    if membership.role == "owner" and len(_owners(spool, membership.team_id)) <= 1:
        raise MembershipRefused(
            f"The last owner of a team cannot {leaving}. Make someone else an owner first."
        )


async def change_role(spool: Spool, team_id: str, user_id: str, role: str) -> MembershipRecord:
    if role not in ROLES:
        raise MembershipRefused("Choose the role member, admin or owner.")
    async for attempt in spool.guarded(_owners_lock(team_id)):
        with attempt:
            membership = _member(spool, team_id, user_id)
            if role != "owner":
                _keep_an_owner(spool, membership, "be given another role")
            changed = replace(membership, role=role)
            batch = WriteBatch()
            user_store.put_membership(batch, changed)
            await spool.commit(batch)
    return changed


async def remove_member(
    spool: Spool, team_id: str, user_id: str, *, leaving: bool = False
) -> MembershipRecord:
    """Take the user out of the team (`leaving`: on their own word). They keep their account
    and other teams; a session of theirs showing this team moves to another of their teams at
    its next request."""
    async for attempt in spool.guarded(_owners_lock(team_id)):
        with attempt:
            membership = _member(spool, team_id, user_id)
            _keep_an_owner(spool, membership, "leave it" if leaving else "be removed")
            batch = WriteBatch()
            user_store.delete_membership(batch, membership)
            await spool.commit(batch)
    return membership


async def rename_team(spool: Spool, team: TeamRecord, name: str) -> TeamRecord:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise MembershipRefused("Enter the team's name.")
    if len(cleaned) > MAX_TEAM_NAME:
        raise MembershipRefused(f"A team's name has at most {MAX_TEAM_NAME} characters.")
    renamed = replace(team, name=cleaned)
    batch = WriteBatch()
    TEAMS.put(batch, team.id, renamed)
    await spool.commit(batch)
    return renamed
