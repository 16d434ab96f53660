"""Who is looking at a page: `g.viewer`, set by the request guard for every signed-in request."""

from __future__ import annotations

from dataclasses import dataclass

from postwire.store.accounts import TeamRecord
from postwire.store.sessions import SessionRecord
from postwire.store.users import MembershipRecord, TeamPolicyRecord, UserRecord


@dataclass(frozen=True, slots=True)
class Viewer:
    user: UserRecord
    team: TeamRecord  # the team the pages show: every lookup by id is scoped to it
    role: str  # the user's role in `team`
    session: SessionRecord
    # Every team the user belongs to, by name, for the team menu.
    teams: tuple[tuple[MembershipRecord, TeamRecord], ...]
    policy: TeamPolicyRecord
