"""What `postwire users create` does: make an owner from the shell, on the same spool as a
running `serve` (LMDB lets both processes use it at once).

The operator vouches for the address, so it counts as verified. An address that already has
an account is made an owner of the team (and gets the new password, if one is given): the way
back in for an operator locked out of the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

import trio

from postwire.accounts import links, passwords, users
from postwire.config import Config
from postwire.errors import PostwireError
from postwire.store import accounts
from postwire.store.accounts import TeamRecord
from postwire.store.spool import Spool, serve_spool

DEFAULT_TEAM_NAME: Final = "default"
MAX_EMAIL_LENGTH: Final = 254


@dataclass(frozen=True, slots=True)
class CreatedOwner:
    user_id: str
    email: str
    team: TeamRecord
    existed: bool  # the address had an account already: it was made an owner
    set_password_url: str | None  # when no password was given: the one-time link to set one


def check_email(email: str) -> str:
    """The address, trimmed; PostwireError unless it looks like one (the domain may be any)."""
    email = email.strip()
    local, at, domain = email.rpartition("@")
    if not at or not local or not domain or len(email) > MAX_EMAIL_LENGTH or " " in email:
        raise PostwireError(f"{email!r} is not an email address")
    return email


async def create_owner(
    config: Config, email: str, team_name: str | None, password: str | None, name: str = ""
) -> CreatedOwner:
    email = check_email(email)
    if password is not None and (problem := passwords.password_problem(password)):
        raise PostwireError(problem)
    password_hash = None if password is None else await passwords.hash_password(password)
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = datetime.now(UTC)
    refusal: PostwireError | None = None
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        try:
            created = await _create_owner(spool, config, email, team_name, password_hash, name, now)
        except PostwireError as error:  # raised here, not from inside the nursery's group
            refusal = error
        finally:
            nursery.cancel_scope.cancel()
    if refusal is not None:
        raise refusal
    return created


async def _create_owner(
    spool: Spool,
    config: Config,
    email: str,
    team_name: str | None,
    password_hash: str | None,
    name: str,
    now: datetime,
) -> CreatedOwner:
    team = await _team(spool, team_name, now)
    user = users.find_user_by_email(spool, email)
    existed = user is not None
    if user is None:
        user = await users.create_user(
            spool,
            email=email,
            name=name or email.partition("@")[0],
            now=now,
            password_hash=password_hash,
            email_verified=True,
        )
    elif password_hash is not None:
        user = await users.update_user(
            spool, replace(user, password_hash=password_hash, email_verified=True)
        )
    await users.add_membership(spool, user.id, team.id, "owner", now)
    url = None
    if password_hash is None and user.password_hash is None:
        token, _ = await links.issue_link(
            spool,
            "set_password",
            email=user.email,
            ttl=links.SET_PASSWORD_TTL,
            now=now,
            user_id=user.id,
        )
        url = links.link_url(config.dashboard.public_url, "set_password", token)
    return CreatedOwner(user.id, user.email, team, existed, url)


async def _team(spool: Spool, name: str | None, now: datetime) -> TeamRecord:
    """The team called `name` (made if there is none), or with no name the only team (a
    "default" one made if there is no team at all)."""
    teams = accounts.list_teams(spool)
    if name is not None:
        name = name.strip()
        if not name or len(name) > 100:
            raise PostwireError("the team name must be 1 to 100 characters")
        named = [team for team in teams if team.name == name]
        if len(named) > 1:
            raise PostwireError(f"several teams are called {name!r}")
        return named[0] if named else await accounts.create_team(spool, name, now)
    if len(teams) > 1:
        raise PostwireError("there are several teams: choose one with --team NAME")
    if teams:
        return teams[0]
    return await accounts.create_team(spool, DEFAULT_TEAM_NAME, now)
