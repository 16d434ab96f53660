"""Starting an account afresh when a mailed link first proves its address to a stranger.

Open sign-up takes any address, and a team's SSO may make an account from an invitation: until
a link mailed to the address is opened, whoever made the account may not be the address's
owner. If they were not, everything they set up would outlive the owner's arrival: their
password, sessions, authenticator apps, passkeys (a sign-in of their own), recovery codes, SSO
links and the teams they made (whose API keys they hold). So when a mailed link first confirms
an address for an account and the person opening it has not shown they are the account's
holder (a password reset, or a confirmation link opened without a session of that account),
the account keeps only its id and address: every session ends, every second factor, recovery
code and SSO link goes, and its memberships are dropped. The teams stay with their data (a team
left without members stays for the operator). With open sign-up, the account gets a new team
of its own, as a sign-up would have made.

Everything is written in the batch that redeems the link, so the link works at most once and
the account is never half reset.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from postwire._core import WriteBatch
from postwire.accounts.users import iso_timestamp
from postwire.store import mfa_devices
from postwire.store import sessions as session_store
from postwire.store import users as user_store
from postwire.store.accounts import TEAMS, add_team
from postwire.store.spool import Spool
from postwire.store.sso_identities import delete_sso_identity, sso_identities_of_user
from postwire.store.users import MembershipRecord, UserRecord


@dataclass(frozen=True, slots=True)
class FreshStart:
    """What starting the account afresh removed, for the page to tell its new holder."""

    sessions: int
    authenticator_apps: int
    passkeys: int
    recovery_codes: bool
    sso_links: int
    teams_left: tuple[str, ...]
    new_team: str | None

    def summary(self) -> str:
        """In words: why, then what was removed and what the account has now."""
        removed = [f"{self.sessions} session{_s(self.sessions)} signed out"]
        for count, what in (
            (self.authenticator_apps, "authenticator app"),
            (self.passkeys, "passkey"),
            (self.sso_links, "single sign-on link"),
        ):
            if count:
                removed.append(f"{count} {what}{_s(count)} removed")
        if self.recovery_codes:
            removed.append("recovery codes removed")
        if self.teams_left:
            names = ", ".join(f"“{name}”" for name in self.teams_left)
            removed.append(f"left the team{_s(len(self.teams_left))} {names}")
        text = (
            "This account's address had never been confirmed, so whoever made the account may"
            " not have been you. It was started afresh: " + "; ".join(removed) + "."
        )
        if self.new_team is not None:
            text += f" It owns a new team, “{self.new_team}”."
        return text


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def start_afresh(
    spool: Spool,
    batch: WriteBatch,
    user: UserRecord,
    *,
    email: str,
    password_hash: str | None,
    own_team: bool,
    now: datetime,
) -> tuple[UserRecord, FreshStart]:
    """Write into `batch` the account `user` started afresh at `email`, confirmed, with
    `password_hash` (None: none until one is set); `own_team` gives it a team of its own."""
    sessions = session_store.sessions_of_user(spool, user.id)
    for session in sessions:
        session_store.delete_session(batch, session)
    devices = mfa_devices.delete_all_of_user(spool, batch, user.id)
    had_codes = mfa_devices.get_recovery_codes(spool, user.id) is not None
    links = sso_identities_of_user(spool, user.id)
    for link in links:
        delete_sso_identity(batch, link)
    teams_left = []
    for membership in user_store.memberships_of_user(spool, user.id):
        user_store.delete_membership(batch, membership)
        team = TEAMS.get(spool, membership.team_id)
        if team is not None:
            teams_left.append(team.name)
    local_part = email.partition("@")[0]
    new_team = None
    if own_team:
        new_team = add_team(batch, f"{local_part}'s team", now)
        owner = MembershipRecord(new_team.id, user.id, "owner", iso_timestamp(now))
        user_store.put_membership(batch, owner)
    # A change of address: the batch fails with KeyExistsError if it was taken meanwhile.
    user_store.move_email(batch, user.id, user.email, email)
    fresh = replace(
        user,
        email=email,
        name=local_part,
        password_hash=password_hash,
        email_verified=True,
        pending_email="",
    )
    user_store.put_user(batch, fresh)
    return fresh, FreshStart(
        sessions=len(sessions),
        authenticator_apps=sum(device.kind == "totp" for device in devices),
        passkeys=sum(device.kind == "passkey" for device in devices),
        recovery_codes=had_codes,
        sso_links=len(links),
        teams_left=tuple(sorted(teams_left, key=str.lower)),
        new_team=None if new_team is None else new_team.name,
    )
