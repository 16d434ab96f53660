"""Who a provider's identity signs in as: Google and GitHub find accounts by a confirmed
address only and make an account only when sign-up is open; a team's provider opens only
accounts linked to its `(team, issuer, subject)` by their owner, and makes new ones for its
invitees (with the invited role) and addresses of its verified email domains, no one else."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from postwire import _core
from postwire.accounts import users
from postwire.accounts.identity_linking import (
    SignInRefused,
    UnlinkedAccount,
    account_for_identity,
    account_for_team_identity,
    link_proven_by_owner,
    link_team_identity,
)
from postwire.accounts.invitations import invite, list_pending
from postwire.accounts.oidc import Identity
from postwire.accounts.system_mail import SystemMailer
from postwire.config import Config
from postwire.store.accounts import TeamRecord, create_team
from postwire.store.spool import Spool
from postwire.store.sso import SsoConfigRecord, put_sso_config

NOW = datetime(2026, 11, 25, 5, 0, tzinfo=UTC)
ISSUER = "https://idp.corp.example"
ANN = Identity(
    email="ann@corp.example", email_verified=True, name="Ann", subject="1", issuer=ISSUER
)


async def _link(
    spool: Spool,
    identity: Identity,
    *,
    provider: str = "google",
    team_id: str | None = None,
    signup: str = "open",
) -> users.UserRecord:
    if team_id is not None:
        return await account_for_team_identity(spool, identity, team_id, now=NOW)
    return await account_for_identity(spool, identity, provider=provider, signup=signup, now=NOW)


async def test_an_unverified_address_is_refused(spool: Spool) -> None:
    with pytest.raises(SignInRefused, match=r"has not verified the address ann@corp\.example"):
        await _link(spool, replace(ANN, email_verified=False))
    assert users.find_user_by_email(spool, ANN.email) is None


async def test_open_sign_up_makes_an_account_owning_a_team(spool: Spool) -> None:
    user = await _link(spool, ANN)
    assert user.email_verified and user.name == "Ann"
    [(membership, team)] = users.memberships_of(spool, user)
    assert (membership.role, team.name) == ("owner", "Ann's team")
    # The same address signs in to the same account next time.
    assert (await _link(spool, ANN, provider="github")).id == user.id


async def test_invite_only_refuses_an_address_without_an_account(spool: Spool) -> None:
    with pytest.raises(SignInRefused, match=r"No account uses ann@corp\.example"):
        await _link(spool, ANN, signup="invite_only")


async def test_invite_only_makes_the_account_of_an_invited_address(
    spool: Spool, tmp_path: Path
) -> None:
    teams = [await create_team(spool, name, NOW) for name in ("Corp", "Lab")]
    owner = await users.create_user(
        spool, email="owner@corp.example", name="O", now=NOW, email_verified=True
    )
    mailer = SystemMailer(Config(data_dir=tmp_path), spool, None)
    for team, role in zip(teams, ("admin", "member"), strict=True):
        await users.add_membership(spool, owner.id, team.id, "owner", NOW)
        await _invite(spool, mailer, team, owner, ANN.email, role)
    user = await _link(spool, ANN, provider="github", signup="invite_only")
    joined = {team.name: membership.role for membership, team in users.memberships_of(spool, user)}
    assert joined == {"Corp": "admin", "Lab": "member"}  # no team of its own
    assert all(not list_pending(spool, team.id) for team in teams)


async def test_an_existing_account_is_found_only_once_its_address_is_confirmed(
    spool: Spool,
) -> None:
    # Open sign-up takes any address: an unconfirmed account may be a squatter's.
    made = await users.create_user(spool, email="Ann@Corp.example", name="Ann", now=NOW)
    with pytest.raises(SignInRefused, match="its address was never confirmed"):
        await _link(spool, ANN, signup="invite_only")
    assert not users.get_user(spool, made.id).email_verified  # type: ignore[union-attr]
    await users.update_user(spool, replace(made, email_verified=True))
    assert (await _link(spool, ANN, signup="invite_only")).id == made.id


async def test_a_teams_provider_admits_members_invitees_and_its_domains_only(
    spool: Spool, tmp_path: Path
) -> None:
    team = await create_team(spool, "Corp", NOW)
    owner = await users.create_user(
        spool, email="owner@corp.example", name="O", now=NOW, email_verified=True
    )
    await users.add_membership(spool, owner.id, team.id, "owner", NOW)
    # A member's account opens only once its owner linked the identity, signed in.
    owner_identity = replace(ANN, email=owner.email, subject="owner")
    with pytest.raises(SignInRefused, match="never linked to it"):
        await _link(spool, owner_identity, team_id=team.id)
    await link_team_identity(spool, owner_identity, team.id, owner, now=NOW)
    assert (await _link(spool, owner_identity, team_id=team.id)).id == owner.id
    # Another subject of the same provider asserting the same address does not.
    with pytest.raises(SignInRefused, match="never linked to it"):
        await _link(spool, replace(owner_identity, subject="forged"), team_id=team.id)

    # An outsider is refused, with an account elsewhere or none.
    outsider = replace(ANN, email="zed@else.example", name="Zed", subject="9")
    with pytest.raises(SignInRefused, match="not a member of this team"):
        await _link(spool, outsider, team_id=team.id)
    zed = await _link(spool, replace(outsider, issuer=""))
    with pytest.raises(UnlinkedAccount, match="never linked to it"):
        await _link(spool, outsider, team_id=team.id)
    # Even its owner's password links it only to a team that has them or invited them.
    with pytest.raises(SignInRefused, match="not a member of this team"):
        await link_proven_by_owner(spool, outsider, team.id, zed, now=NOW)

    # An invitee joins with the invited role; the invitation is used up.
    mailer = SystemMailer(Config(data_dir=tmp_path), spool, None)
    await _invite(spool, mailer, team, owner, "bob@else.example", "admin")
    bob = replace(ANN, email="bob@else.example", name="Bob", subject="2")
    joined = await _link(spool, bob, team_id=team.id)
    assert users.get_membership(spool, joined.id, team.id).role == "admin"  # type: ignore[union-attr]
    # The team's provider asserted the address; no mail confirmed it. Its only team is this.
    assert not joined.email_verified
    assert [t.id for _, t in users.memberships_of(spool, joined)] == [team.id]

    # An address under an SSO domain the team has not verified joins nothing.
    batch = _core.WriteBatch()
    put_sso_config(
        batch,
        SsoConfigRecord(team_id=team.id, protocol="saml", email_domains=["corp.example"]),
        None,
    )
    await spool.commit(batch)
    with pytest.raises(SignInRefused, match="not a member of this team"):
        await _link(spool, ANN, team_id=team.id)


async def _invite(
    spool: Spool,
    mailer: SystemMailer,
    team: TeamRecord,
    owner: users.UserRecord,
    email: str,
    role: str,
) -> None:
    await invite(
        spool,
        mailer,
        team=team,
        email=email,
        role=role,
        inviter=owner,
        inviter_role="owner",
        public_url="http://localhost:3001",
        now=NOW,
    )
