"""Invitations, password resets, address checks and team membership rules, against a real
spool: each link used in the commit of the change it authorises."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

from postwire.accounts import users
from postwire.accounts.email_verification import send_verification, verify_email
from postwire.accounts.invitations import (
    DEFAULT_LIMITS,
    InvitationError,
    InvitationLimits,
    accept_as_new_user,
    accept_as_user,
    invite,
    list_pending,
    open_invitation,
    revoke,
)
from postwire.accounts.links import LinkRefused, check_link
from postwire.accounts.password_reset import (
    MAX_RESETS_PER_ADDRESS,
    PasswordRefused,
    request_password_reset,
    set_password_by_link,
)
from postwire.accounts.passwords import verify_password
from postwire.accounts.sessions import SessionLimits, list_sessions, start_session
from postwire.accounts.system_mail import SystemMailer
from postwire.accounts.team_members import MembershipRefused, change_role, remove_member
from postwire.config import Config
from postwire.store.accounts import TeamRecord, create_team
from postwire.store.invitations import InvitationRecord
from postwire.store.spool import Spool
from postwire.store.users import UserRecord

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
PUBLIC_URL = "http://localhost:3001"
LINK = re.compile(r"(invitation|password reset|address verification) link for (\S+): (\S+)")
LIMITS = SessionLimits(idle_seconds=3600, absolute_seconds=86400)


@pytest.fixture
def mailer(spool: Spool, tmp_path: Path) -> SystemMailer:
    return SystemMailer(Config(data_dir=tmp_path), spool)  # no mail_from: links in the log


def _token(caplog: pytest.LogCaptureFixture, to: str) -> str:
    found = [m for m in LINK.finditer(caplog.text) if m.group(2) == to]
    assert found, caplog.text
    return found[-1].group(3).rsplit("/", 1)[1]


async def _invite(
    spool: Spool,
    mailer: SystemMailer,
    team: TeamRecord,
    inviter: UserRecord,
    email: str,
    role: str,
    inviter_role: str = "owner",
    *,
    limits: InvitationLimits = DEFAULT_LIMITS,
    now: datetime = NOW,
) -> InvitationRecord:
    invited = await invite(
        spool,
        mailer,
        team=team,
        email=email,
        role=role,
        inviter=inviter,
        inviter_role=inviter_role,
        public_url=PUBLIC_URL,
        now=now,
        limits=limits,
    )
    assert not invited.mailed and invited.link.startswith(f"{PUBLIC_URL}/invite/")
    return invited.invitation


async def _owner(spool: Spool) -> tuple[TeamRecord, UserRecord]:
    team = await create_team(spool, "Acme", NOW)
    owner = await users.create_user(
        spool, email="ada@example.com", name="Ada", now=NOW, email_verified=True
    )
    await users.add_membership(spool, owner.id, team.id, "owner", NOW)
    return team, owner


async def test_a_new_person_accepts_and_the_link_is_spent(
    spool: Spool, mailer: SystemMailer, caplog: pytest.LogCaptureFixture
) -> None:
    team, owner = await _owner(spool)
    with caplog.at_level(logging.WARNING):
        invitation = await _invite(spool, mailer, team, owner, "Bo@Example.net", "admin")
    assert f"invitation link for Bo@Example.net: {PUBLIC_URL}/invite/" in caplog.text
    token = _token(caplog, "Bo@Example.net")
    assert list_pending(spool, team.id) == [invitation]
    assert open_invitation(spool, token, NOW).team == team

    user, membership = await accept_as_new_user(
        spool, token, name="Bo", password_hash="$argon2id$x", now=NOW
    )
    assert user.email == "bo@example.net" and user.email_verified
    assert membership.role == "admin" and users.get_membership(spool, user.id, team.id)
    assert list_pending(spool, team.id) == []
    with pytest.raises(LinkRefused):
        open_invitation(spool, token, NOW)


async def test_an_existing_account_joins_only_as_the_address_invited(
    spool: Spool, mailer: SystemMailer, caplog: pytest.LogCaptureFixture
) -> None:
    team, owner = await _owner(spool)
    cy = await users.create_user(spool, email="cy@example.net", name="Cy", now=NOW)
    with caplog.at_level(logging.WARNING):
        await _invite(spool, mailer, team, owner, "cy@example.net", "member")
    token = _token(caplog, "cy@example.net")
    with pytest.raises(InvitationError, match=r"for cy@example\.net"):
        await accept_as_user(spool, token, owner, NOW)
    assert check_link(spool, token, ("invite",), NOW)  # still usable by Cy
    membership = await accept_as_user(spool, token, cy, NOW)
    assert membership.role == "member"
    joined = users.get_user(spool, cy.id)
    assert joined is not None and joined.email_verified
    with pytest.raises(InvitationError, match="member of Acme already"):
        await _invite(spool, mailer, team, owner, "CY@example.net", "admin")


async def test_inviting_again_replaces_and_revoking_deletes(
    spool: Spool, mailer: SystemMailer, caplog: pytest.LogCaptureFixture
) -> None:
    team, owner = await _owner(spool)
    other = await create_team(spool, "Other", NOW)
    with caplog.at_level(logging.WARNING):
        first = await _invite(spool, mailer, team, owner, "di@example.net", "member")
        old_token = _token(caplog, "di@example.net")
        second = await _invite(spool, mailer, team, owner, "di@example.net", "admin")
        new_token = _token(caplog, "di@example.net")
    assert list_pending(spool, team.id) == [second] and first.id != second.id
    with pytest.raises(LinkRefused):
        open_invitation(spool, old_token, NOW)
    assert await revoke(spool, other.id, second.id) is None  # another team's id finds nothing
    assert await revoke(spool, team.id, second.id) == second
    assert list_pending(spool, team.id) == []
    with pytest.raises(LinkRefused):
        open_invitation(spool, new_token, NOW)
    with pytest.raises(InvitationError, match="Only an owner"):
        await _invite(spool, mailer, team, owner, "ho@example.net", "owner", inviter_role="admin")
    with pytest.raises(InvitationError, match="not an email address"):
        await _invite(spool, mailer, team, owner, "nobody", "member")


async def test_invitations_are_limited_per_team_and_address_re_invitations_included(
    spool: Spool, mailer: SystemMailer
) -> None:
    team, owner = await _owner(spool)
    limits = InvitationLimits(per_team=4, per_address=2)
    for role in ("member", "admin"):  # the second replaces the first, and counts
        await _invite(spool, mailer, team, owner, "fi@example.net", role, limits=limits)
    with pytest.raises(
        InvitationError, match=re.escape("Too many invitations went to FI@example.net")
    ):
        await _invite(spool, mailer, team, owner, "FI@example.net", "member", limits=limits)
    for address in ("gu@example.net", "ha@example.net"):  # a refusal counts for nothing
        await _invite(spool, mailer, team, owner, address, "member", limits=limits)
    with pytest.raises(InvitationError, match="This team has sent 4 invitations"):
        await _invite(spool, mailer, team, owner, "hal@example.net", "member", limits=limits)
    pending = {i.email for i in list_pending(spool, team.id)}
    assert pending == {"fi@example.net", "gu@example.net", "ha@example.net"}
    # Another team has its own count; the address's count is everyone's.
    other = await create_team(spool, "Other", NOW)
    await _invite(spool, mailer, other, owner, "hal@example.net", "member", limits=limits)
    with pytest.raises(InvitationError, match=re.escape("fi@example.net")):
        await _invite(spool, mailer, other, owner, "fi@example.net", "member", limits=limits)
    # A burst gets exactly what the hour has room for.
    burst_team = await create_team(spool, "Burst", NOW)
    outcomes: list[bool] = []

    async def one(n: int) -> None:
        try:
            await _invite(spool, mailer, burst_team, owner, f"b{n}@example.net", "member",
                          limits=limits)  # fmt: skip
        except InvitationError:
            outcomes.append(False)
        else:
            outcomes.append(True)

    async with trio.open_nursery() as nursery:
        for n in range(12):
            nursery.start_soon(one, n)
    assert sorted(outcomes) == [False] * 8 + [True] * 4
    # The next hour starts afresh.
    later = NOW + timedelta(hours=1)
    await _invite(spool, mailer, team, owner, "fi@example.net", "member", limits=limits, now=later)


async def test_an_expired_invitation_does_not_open(
    spool: Spool, mailer: SystemMailer, caplog: pytest.LogCaptureFixture
) -> None:
    team, owner = await _owner(spool)
    with caplog.at_level(logging.WARNING):
        await _invite(spool, mailer, team, owner, "ed@example.net", "member")
    token = _token(caplog, "ed@example.net")
    with pytest.raises(LinkRefused):
        await accept_as_new_user(
            spool, token, name="Ed", password_hash="h", now=NOW + timedelta(days=7)
        )


async def test_password_reset_answers_alike_limits_and_ends_sessions(
    spool: Spool, mailer: SystemMailer, caplog: pytest.LogCaptureFixture
) -> None:
    _, owner = await _owner(spool)
    await start_session(
        spool, owner, "t", mfa_pending=False, method="password", now=NOW.timestamp()
    )
    with caplog.at_level(logging.WARNING):
        await request_password_reset(
            spool,
            mailer,
            email="nobody@example.com",
            client="192.0.2.1",
            public_url=PUBLIC_URL,
            now=NOW,
        )
        assert "link for nobody" not in caplog.text  # nothing sent, nothing said
        for _ in range(MAX_RESETS_PER_ADDRESS + 1):
            await request_password_reset(
                spool,
                mailer,
                email="ADA@example.com",
                client="192.0.2.1",
                public_url=PUBLIC_URL,
                now=NOW,
            )
    assert caplog.text.count("password reset link for ada@example.com") == MAX_RESETS_PER_ADDRESS
    token = _token(caplog, "ada@example.com")

    with pytest.raises(PasswordRefused):
        await set_password_by_link(spool, token, "short", NOW)
    changed, fresh_start = await set_password_by_link(spool, token, "a new long password", NOW)
    assert fresh_start is None  # the owner's address was confirmed
    assert await verify_password(changed.password_hash, "a new long password")
    assert list_sessions(spool, owner.id, NOW.timestamp(), LIMITS) == []
    with pytest.raises(LinkRefused):
        await set_password_by_link(spool, token, "another long password", NOW)


async def test_verification_link_verifies_the_address_it_was_sent_to(
    spool: Spool, mailer: SystemMailer, caplog: pytest.LogCaptureFixture
) -> None:
    fay = await users.create_user(spool, email="fay@example.net", name="Fay", now=NOW)
    with caplog.at_level(logging.WARNING):
        assert await send_verification(spool, mailer, fay, public_url=PUBLIC_URL, now=NOW)
    token = _token(caplog, "fay@example.net")
    verified, fresh_start = await verify_email(spool, token, NOW, signed_in_as=fay.id)
    assert verified.email_verified and fresh_start is None
    with pytest.raises(LinkRefused):
        await verify_email(spool, token, NOW, signed_in_as=fay.id)


async def test_a_team_keeps_an_owner(spool: Spool) -> None:
    team, owner = await _owner(spool)
    gus = await users.create_user(spool, email="gus@example.net", name="Gus", now=NOW)
    await users.add_membership(spool, gus.id, team.id, "member", NOW)
    with pytest.raises(MembershipRefused, match="last owner"):
        await change_role(spool, team.id, owner.id, "admin")
    with pytest.raises(MembershipRefused, match="last owner"):
        await remove_member(spool, team.id, owner.id, leaving=True)
    await change_role(spool, team.id, gus.id, "owner")
    assert (await change_role(spool, team.id, owner.id, "member")).role == "member"
    await remove_member(spool, team.id, owner.id)
    assert users.get_membership(spool, owner.id, team.id) is None
    with pytest.raises(MembershipRefused, match="not a member"):
        await change_role(spool, team.id, owner.id, "admin")
