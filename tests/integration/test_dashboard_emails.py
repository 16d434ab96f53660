"""The Emails pages served by the dashboard app over a real spool, through its request guard
with a real session: the list with its filters and pages, an email's page and its parts, the
sandboxed HTML route's own CSP, the raw download, and another team's ids answered 404."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio
from quart.typing import TestClientProtocol as Client
from werkzeug.datastructures import Headers

from postwire import _core
from postwire._core import WriteBatch
from postwire.accounts.sessions import start_session
from postwire.accounts.users import add_membership, create_user
from postwire.config import load_config
from postwire.dashboard.app import create_dashboard
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages import emails as emails_page
from postwire.store.accounts import create_team
from postwire.store.deliveries import add_event
from postwire.store.email_samples import SampleSender, sample_emails, seed_emails
from postwire.store.emails import EmailRecord, add_email
from postwire.store.spool import TABLES, Spool

START_MS = 1_790_000_000_000  # 2026-09-21 14:13 UTC
HOUR_MS = 3_600_000
SENDERS = [SampleSender("dom-1", "one.test", ["key-1"])]
RAW = (
    b"From: Ann <ann@one.test>\r\nTo: bob@example.com\r\nSubject: Hi\r\n"
    b"Message-ID: <m1@one.test>\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: multipart/alternative; boundary="b"\r\n\r\n'
    b"--b\r\nContent-Type: text/plain\r\n\r\nHello Bob\r\n"
    b"--b\r\nContent-Type: text/html\r\n\r\n<p>Hello <b>Bob</b></p><script>alert(1)</script>\r\n"
    b"--b--\r\n"
)


@dataclass
class Site:
    spool: Spool
    client: Client
    cookie: dict[str, str]
    team_id: str
    other_team_id: str
    records: list[EmailRecord]  # the team's seeded emails, newest first

    async def get(self, path: str) -> tuple[int, str, Headers]:
        response = await self.client.get(path, headers=self.cookie)
        return response.status_code, await response.get_data(as_text=True), response.headers


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        now = datetime.now(UTC)
        team = await create_team(spool, "Ours", now)
        other = await create_team(spool, "Theirs", now)
        user = await create_user(spool, email="ann@example.org", name="Ann", now=now)
        await add_membership(spool, user.id, team.id, "member", now)
        token, _ = await start_session(
            spool, user, team.id, mfa_pending=False, method="password", now=now.timestamp()
        )
        end_ms = START_MS + 120 * HOUR_MS
        records = list(sample_emails(team.id, SENDERS, 120, start_ms=START_MS, end_ms=end_ms))
        await seed_emails(spool, records)
        await seed_emails(
            spool, sample_emails(other.id, SENDERS, 5, start_ms=START_MS, end_ms=end_ms)
        )
        app = create_dashboard(DashboardContext(config=config, spool=spool))
        async with app.test_app() as test_app:
            cookie = {"Cookie": f"pw_session={token}"}
            yield Site(spool, test_app.test_client(), cookie, team.id, other.id, records[::-1])
        nursery.cancel_scope.cancel()
    await spool.close()


def listed_ids(body: str) -> list[str]:
    return re.findall(r'<tr data-email-id="([0-9a-f-]{36})"', body)


async def test_the_list_pages_and_filters(site: Site) -> None:
    status, body, headers = await site.get("/emails")
    assert status == 200
    assert listed_ids(body) == [r.id for r in site.records[:50]]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    older = re.search(r'href="(/emails\?after=[^"]+)"', body)
    assert older is not None
    _, body, _ = await site.get(older.group(1).replace("&amp;", "&"))
    assert listed_ids(body) == [r.id for r in site.records[50:100]]

    _, body, _ = await site.get("/emails?status=bounced")
    assert listed_ids(body) == [r.id for r in site.records if r.last_event == "bounced"]
    _, body, _ = await site.get("/emails?q=grace&status=delivered")
    expected = [r.id for r in site.records if r.last_event == "delivered" and "grace" in r.to[0]][
        :50
    ]
    assert listed_ids(body) == expected
    _, body, _ = await site.get("/emails?since=2026-09-22&until=2026-09-22")
    day = [r.id for r in site.records if r.created_at.startswith("2026-09-22")]
    assert listed_ids(body) == day and len(day) == 24
    status, body, _ = await site.get("/emails?since=yesterday&status=lost")
    assert status == 200 and "is not a date" in body and "no status called" in body
    assert listed_ids(body) == [r.id for r in site.records[:50]]


async def test_a_rare_search_answers_a_partial_page_and_continues(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emails_page, "READ_BUDGET", 40)
    wanted = [r.id for r in site.records if "grace" in r.to[0]]
    status, body, _ = await site.get("/emails?q=grace")
    assert status == 200 and "Searched 40 emails without filling this page" in body
    shown = listed_ids(body)
    assert shown == [r.id for r in site.records[:40] if r.id in wanted]
    found = list(shown)
    while more := re.search(r'href="(/emails\?[^"]*after=[^"]+)">Continue searching', body):
        _, body, _ = await site.get(more.group(1).replace("&amp;", "&"))
        found += listed_ids(body)
    assert found == wanted


async def test_an_emails_page_its_html_frame_and_raw_source(site: Site) -> None:
    email = EmailRecord(
        id=_core.new_id(), team_id=site.team_id, domain_id="dom-1",
        sender="Ann <ann@one.test>", to=["bob@example.com"], subject="Hi",
        message_id="<m1@one.test>", created_at="2026-11-25 10:00:00.000000+00",
        last_event="queued", envelope_from="rp@one.test", recipients=["bob@example.com"],
    )  # fmt: skip
    batch = WriteBatch()
    add_email(batch, email, RAW, 2**62, 0)  # due far ahead: nothing delivers it
    add_event(
        batch,
        site.team_id,
        email.id,
        "email.delivery_delayed",
        START_MS,
        to="bob@example.com",
        diagnostic="451 4.7.1 greylisted",
    )
    await site.spool.commit(batch)

    status, body, _ = await site.get(f"/emails/{email.id}")
    assert status == 200
    assert "451 4.7.1 greylisted" in body  # the remote reply, on the timeline
    assert f'<iframe class="email-html" sandbox src="/emails/{email.id}/html"' in body
    assert "Hello Bob" in body  # the text part, read from the source
    assert "Message-ID" in body and f"/emails/{email.id}/raw" in body

    status, html, headers = await site.get(f"/emails/{email.id}/html")
    assert status == 200 and "<b>Bob</b>" in html
    policy = headers["Content-Security-Policy"]
    assert policy.startswith("sandbox;") and "frame-ancestors 'self'" in policy
    assert "script-src" not in policy and "default-src 'none'" in policy

    response = await site.client.get(f"/emails/{email.id}/raw", headers=site.cookie)
    assert response.status_code == 200
    assert await response.get_data() == RAW
    assert response.headers["Content-Disposition"] == f'attachment; filename="{email.id}.eml"'
    assert response.mimetype == "message/rfc822"

    status, body, _ = await site.get(f"/emails/status?id={email.id}&id={site.records[0].id}")
    assert status == 200 and f'"{email.id}":"queued"' in body.replace(" ", "")


async def test_a_delivered_email_without_source_says_so(site: Site) -> None:
    record = site.records[0]
    status, body, _ = await site.get(f"/emails/{record.id}")
    assert status == 200 and "no longer kept" in body
    assert (await site.get(f"/emails/{record.id}/raw"))[0] == 404
    assert (await site.get(f"/emails/{record.id}/html"))[0] == 404  # no HTML part


async def test_another_teams_email_is_not_found(site: Site) -> None:
    theirs = replace(site.records[0], id=_core.new_id(), team_id=site.other_team_id)
    await seed_emails(site.spool, [theirs])
    for path in ("", "/html", "/raw"):
        status, body, _ = await site.get(f"/emails/{theirs.id}{path}")
        assert status == 404, path
        assert theirs.subject not in body
    _, body, _ = await site.get(f"/emails/status?id={theirs.id}")
    assert theirs.id not in body
    assert (await site.get("/emails/not-an-id"))[0] == 404


async def test_signed_out_visitors_go_to_log_in(site: Site) -> None:
    response = await site.client.get("/emails?status=sent")
    assert response.status_code == 303
    assert response.headers["Location"].startswith("/login?next=/emails")
