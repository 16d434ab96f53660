"""The Team and Account pages served by the dashboard app over a real spool, through its
request guard with real sessions: ids of another team's members and invitations answered 404,
roles enforced (a member may change their own account, not invite), forms without the CSRF
token refused, a password reset asked for answering alike, its mail sent after the answer,
and password and address changes needing the current password."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio
from quart.typing import TestClientProtocol as Client

from postwire import _core
from postwire.accounts.invitations import invite
from postwire.accounts.passwords import hash_password, verify_password
from postwire.accounts.sessions import start_session
from postwire.accounts.system_mail import SystemMailer
from postwire.accounts.users import (
    add_membership,
    create_user,
    get_membership,
    get_user,
    set_password_hash,
)
from postwire.config import load_config
from postwire.dashboard.app import create_dashboard
from postwire.dashboard.context import DashboardContext
from postwire.store.accounts import create_team
from postwire.store.invitations import pending_invitations
from postwire.store.sessions import SessionRecord
from postwire.store.spool import TABLES, Spool
from postwire.store.users import UserRecord


@dataclass
class Visitor:
    client: Client
    token: str
    session: SessionRecord

    async def post(self, path: str, form: dict[str, str], *, csrf: bool = True) -> int:
        fields = {"csrf_token": self.session.csrf_token} if csrf else {}
        response = await self.client.post(
            path, form=fields | form, headers={"Cookie": f"pw_session={self.token}"}
        )
        return response.status_code

    async def get(self, path: str) -> tuple[int, str]:
        response = await self.client.get(path, headers={"Cookie": f"pw_session={self.token}"})
        return response.status_code, await response.get_data(as_text=True)


@dataclass
class Site:
    spool: Spool
    client: Client
    owner: Visitor
    member: Visitor
    member_user: UserRecord
    team_id: str
    outsider: UserRecord  # the owner of another team
    other_team_id: str
    other_invitation_id: str


async def _visitor(spool: Spool, client: Client, user: UserRecord, team_id: str) -> Visitor:
    now = datetime.now(UTC).timestamp()
    token, session = await start_session(
        spool, user, team_id, mfa_pending=False, method="password", now=now
    )
    return Visitor(client, token, session)


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        now = datetime.now(UTC)
        team = await create_team(spool, "Ours", now)
        other = await create_team(spool, "Theirs", now)
        people = []
        for address, team_id, role in [
            ("ann@example.org", team.id, "owner"),
            ("bob@example.org", team.id, "member"),
            ("eve@example.org", other.id, "owner"),
        ]:
            user = await create_user(
                spool, email=address, name=address[:3], now=now, email_verified=True
            )
            await add_membership(spool, user.id, team_id, role, now)  # type: ignore[arg-type]
            people.append(user)
        theirs = await invite(
            spool,
            SystemMailer(config, spool),
            team=other,
            email="zed@example.org",
            role="member",
            inviter=people[2],
            inviter_role="owner",
            public_url=config.dashboard.public_url,
            now=now,
        )
        app = create_dashboard(DashboardContext(config=config, spool=spool))
        async with app.test_app() as test_app:
            client = test_app.test_client()
            yield Site(
                spool=spool,
                client=client,
                owner=await _visitor(spool, client, people[0], team.id),
                member=await _visitor(spool, client, people[1], team.id),
                member_user=people[1],
                team_id=team.id,
                outsider=people[2],
                other_team_id=other.id,
                other_invitation_id=theirs.invitation.id,
            )
        nursery.cancel_scope.cancel()
    await spool.close()


async def test_another_teams_ids_are_not_found(site: Site) -> None:
    owner, outsider = site.owner, site.outsider.id
    assert await owner.post(f"/team/members/{outsider}/role", {"role": "member"}) == 404
    assert await owner.post(f"/team/members/{outsider}/remove", {}) == 404
    assert await owner.post(f"/team/invitations/{site.other_invitation_id}/revoke", {}) == 404
    assert get_membership(site.spool, outsider, site.other_team_id) is not None
    assert [i.id for i in pending_invitations(site.spool, site.other_team_id)] == [
        site.other_invitation_id
    ]
    status, page = await owner.get("/team")
    assert status == 200 and "eve@example.org" not in page and "zed@example.org" not in page


async def test_roles_are_enforced_and_own_account_is_a_members(site: Site) -> None:
    member = site.member
    assert await member.post("/team/invitations", {"email": "x@example.org"}) == 403
    assert await member.post(f"/team/members/{site.member_user.id}/role", {"role": "owner"}) == (
        403
    )
    assert await member.post("/team/name", {"name": "Mine"}) == 403
    status, page = await member.get("/team")
    assert status == 200 and 'id="invite-form"' not in page and "Revoke" not in page
    assert await member.post("/account/name", {"name": "Bobby"}) == 303
    renamed = get_user(site.spool, site.member_user.id)
    assert renamed is not None and renamed.name == "Bobby"
    assert await site.owner.post("/team/name", {"name": "  Ours   again "}) == 303
    _, page = await member.get("/team")
    assert "<h1>Ours again</h1>" in page


async def test_forms_without_the_csrf_token_are_refused(site: Site) -> None:
    owner = site.owner
    assert await owner.post("/team/invitations", {"email": "x@example.org"}, csrf=False) == 403
    assert await owner.post("/account/sessions/others", {}, csrf=False) == 403
    assert pending_invitations(site.spool, site.team_id) == []


async def test_signed_out_visitors_go_to_login(site: Site) -> None:
    for path in ("/team", "/account"):
        response = await site.client.get(path)
        assert response.status_code == 303
        assert response.headers["Location"] == f"/login?next={path}"


async def test_a_reset_asked_for_answers_alike_and_mails_after(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    form_page = await site.client.get("/password/forgot")
    cookie = form_page.headers["Set-Cookie"].split(";")[0]
    token = re.search(r'name="csrf_token" value="([^"]+)"', await form_page.get_data(as_text=True))
    assert token is not None
    answers = []
    with caplog.at_level(logging.WARNING):
        for address in ("nobody@example.org", "BOB@example.org"):
            response = await site.client.post(
                "/password/forgot",
                form={"csrf_token": token.group(1), "email": address},
                headers={"Cookie": cookie},
            )
            assert response.status_code == 200
            page = await response.get_data(as_text=True)
            answers.append(re.sub(r'value="[^"]+"', "", page))
        with trio.fail_after(5):
            while "password reset link for bob@example.org" not in caplog.text:
                await trio.sleep(0.01)
    assert answers[0] == answers[1]
    assert "link for nobody" not in caplog.text


async def test_password_and_address_changes_need_the_current_password(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    owner, spool = site.owner, site.spool
    ann = get_user(spool, site.owner.session.user_id)
    assert ann is not None
    await set_password_hash(spool, ann, await hash_password("ann's first passphrase"))
    other = await _visitor(spool, site.client, ann, site.team_id)  # another browser of Ann's

    new = {"password": "ann's second passphrase", "password_confirm": "ann's second passphrase"}
    assert await owner.post("/account/password", new | {"current": "a wrong guess"}) == 303
    unchanged = get_user(spool, ann.id)
    assert unchanged is not None and await verify_password(
        unchanged.password_hash, "ann's first passphrase"
    )
    assert await owner.post("/account/password", new | {"current": "ann's first passphrase"}) == (
        303
    )
    changed = get_user(spool, ann.id)
    assert changed is not None and await verify_password(
        changed.password_hash, "ann's second passphrase"
    )
    assert (await other.get("/account"))[0] == 303  # the other session was signed out
    status, page = await owner.get("/account")
    assert status == 200 and "Your password was changed. 1 other session ended." in page

    move = {"email": "ann@example.net", "current": "ann's second passphrase"}
    assert await owner.post("/account/email", move | {"current": "wrong"}) == 303
    assert get_user(spool, ann.id).email == "ann@example.org"  # type: ignore[union-attr]
    assert await owner.post("/account/email", move | {"email": "bob@example.org"}) == 303
    assert get_user(spool, ann.id).email == "ann@example.org"  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING):
        assert await owner.post("/account/email", move) == 303
    # Nothing moves until the new address is confirmed: it is only noted as pending.
    pending = get_user(spool, ann.id)
    assert pending is not None and pending.email == "ann@example.org"
    assert pending.pending_email == "ann@example.net"
    assert "address verification link for ann@example.net" in caplog.text


async def test_one_session_is_signed_out_by_its_owner_only(site: Site) -> None:
    ann = get_user(site.spool, site.owner.session.user_id)
    assert ann is not None
    other = await _visitor(site.spool, site.client, ann, site.team_id)
    bobs = site.member.session.id
    assert await site.owner.post(f"/account/sessions/{bobs}/end", {}) == 404
    assert (await site.member.get("/account"))[0] == 200
    assert await site.owner.post(f"/account/sessions/{site.owner.session.id}/end", {}) == 303
    assert (await site.owner.get("/account"))[0] == 200  # this browser's: sign out instead
    assert await site.owner.post(f"/account/sessions/{other.session.id}/end", {}) == 303
    assert (await other.get("/account"))[0] == 303
    status, page = await site.owner.get("/team")
    assert status == 200 and "Two-factor" in page
