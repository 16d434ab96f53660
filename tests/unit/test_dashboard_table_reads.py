"""The dashboard's pages read the table store parked, never blocking: on a table store on the
network a blocking read stalls every task of the process (other pages, SMTP sessions,
deliveries) for its round trip. The app is served in-process over a real spool, through its
request guard with a real session; `record_reads` wraps the spool's facade."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from quart.typing import TestClientProtocol as Client

from postwire._core import WriteBatch
from postwire.accounts.sessions import start_session
from postwire.accounts.users import add_membership, create_user
from postwire.audiences.contacts import add_contact
from postwire.audiences.segments import create_segment
from postwire.broadcasts.drafts import BroadcastDrafts
from postwire.config import load_config
from postwire.dashboard.app import create_dashboard
from postwire.dashboard.context import DashboardContext
from postwire.domains.store import create_domain
from postwire.store.accounts import create_team
from postwire.store.deliveries import add_event
from postwire.store.email_samples import SampleSender, sample_emails, seed_emails
from postwire.store.spool import TABLES, Spool
from postwire.suppressions import add_suppression
from postwire.templates.editing import create_template
from postwire.webhooks.endpoints import create_webhook
from tests.table_reads import Read, record_reads

START_MS = 1_790_000_000_000  # 2026-09-21 14:13 UTC
HOUR_MS = 3_600_000
SENDERS = [SampleSender("dom-1", "one.test", ["key-1"])]
# What the guard and the banner read for every page: the session, its user, their teams and
# the team's policies (sign-in, SSO, the viewer's second factors), the domains' health.
GUARD_TABLES = (
    "sessions", "users", "memberships", "teams", "sso_configs", "mfa_devices", "domain_health",
)  # fmt: skip


@dataclass
class Site:
    spool: Spool
    client: Client
    cookie: dict[str, str]
    email_ids: list[str]
    contact_id: str
    segment_id: str
    domain_id: str
    template_id: str
    broadcast_id: str
    webhook_id: str

    async def blocking_reads(self, path: str, tables: tuple[str, ...] = TABLES) -> list[Read]:
        """The blocking reads of `tables` that a GET of `path` makes (it must answer 200)."""
        reads = record_reads(self.spool, tables)
        response = await self.client.get(path, headers=self.cookie)
        assert response.status_code == 200, path
        return [read for read in reads if read.how in ("get", "scan")]


@pytest.fixture
async def site(spool: Spool, tmp_path: Path) -> AsyncIterator[Site]:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    now = datetime.now(UTC)
    team = await create_team(spool, "Ours", now)
    other = await create_team(spool, "Theirs", now)
    user = await create_user(spool, email="ann@example.org", name="Ann", now=now)
    await add_membership(spool, user.id, team.id, "member", now)
    await add_membership(spool, user.id, other.id, "member", now)
    token, _ = await start_session(
        spool, user, team.id, mfa_pending=False, method="password", now=now.timestamp()
    )
    records = list(
        sample_emails(team.id, SENDERS, 20, start_ms=START_MS, end_ms=START_MS + 20 * HOUR_MS)
    )
    await seed_emails(spool, records)
    batch = WriteBatch()
    for event_type in ("email.sent", "email.delivered"):
        add_event(batch, team.id, records[0].id, event_type, START_MS)
    await spool.commit(batch)
    segment = await create_segment(spool, team.id, {"name": "Readers"}, now)
    contact = await add_contact(
        spool, team.id, {"email": records[0].to[0], "segments": [segment.id]}, now
    )
    await add_contact(spool, team.id, {"email": "ada@example.org", "first_name": "Ada"}, now)
    domain = await create_domain(spool, config, team.id, "one.test")
    template = await create_template(spool, team.id, {"name": "Hi", "html": "<p>Hi</p>"}, now)
    context = DashboardContext(config=config, spool=spool)
    broadcast = await BroadcastDrafts(spool, context.acceptor).create(
        team.id, {"name": "News", "segment_id": segment.id, "sender": "", "subject": ""}, now
    )
    webhook = await create_webhook(
        spool, team.id, "https://127.0.0.1/hook", ["email.sent"], now=now, allow_private=True
    )
    await add_suppression(spool, team.id, "gone@example.org", START_MS)
    app = create_dashboard(context)
    async with app.test_app() as test_app:
        cookie = {"Cookie": f"pw_session={token}"}
        client = test_app.test_client()
        ids = [r.id for r in records]
        yield Site(
            spool, client, cookie, ids, contact_id=contact.id, segment_id=segment.id,
            domain_id=domain.id, template_id=template.id, broadcast_id=broadcast.id,
            webhook_id=webhook.id,
        )  # fmt: skip


async def test_the_guard_and_the_banner_read_parked(site: Site, spool: Spool) -> None:
    assert await site.blocking_reads("/emails", GUARD_TABLES) == []


@pytest.mark.parametrize(
    "query",
    ["", "?status=delivered", "?q=grace&status=delivered", "?domain=dom-1", "?since=2026-09-21"],
)
async def test_the_emails_list_reads_parked(site: Site, query: str) -> None:
    assert await site.blocking_reads(f"/emails{query}") == []


async def test_an_emails_pages_read_parked(site: Site) -> None:
    email_id = site.email_ids[0]
    ids = "&".join(f"id={i}" for i in site.email_ids[:5])
    for path in (f"/emails/{email_id}", f"/emails/status?{ids}"):
        assert await site.blocking_reads(path) == []
    page = await site.client.get(f"/emails/{email_id}", headers=site.cookie)
    assert 'class="event event-delivered"' in await page.get_data(as_text=True)


async def test_the_contacts_pages_read_parked(site: Site) -> None:
    for path in (
        "/contacts",
        "/contacts?q=ad",
        "/contacts?name=ada",
        f"/contacts?segment={site.segment_id}",
        f"/contacts/{site.contact_id}",
        "/contacts/new",
    ):
        assert await site.blocking_reads(path) == [], path
    page = await site.client.get(f"/contacts/{site.contact_id}", headers=site.cookie)
    assert f"/emails/{site.email_ids[0]}" in await page.get_data(as_text=True)


async def test_the_domains_pages_read_parked(site: Site) -> None:
    for path in ("/domains", f"/domains/{site.domain_id}"):
        assert await site.blocking_reads(path) == [], path


async def test_the_settings_pages_read_parked(site: Site) -> None:
    for path in ("/api-keys", "/smtp", "/team", "/account", "/brand", "/brand/preview"):
        assert await site.blocking_reads(path) == [], path


async def test_the_templates_pages_read_parked(site: Site) -> None:
    for path in ("/templates", f"/templates/{site.template_id}"):
        assert await site.blocking_reads(path) == [], path


async def test_the_broadcasts_pages_read_parked(site: Site) -> None:
    broadcast = f"/broadcasts/{site.broadcast_id}"
    for path in (
        "/broadcasts",
        broadcast,
        f"{broadcast}/progress",
        f"{broadcast}/edit",
        f"{broadcast}/preview?contact=ada@example.org",
    ):
        assert await site.blocking_reads(path) == [], path


async def test_the_audience_pages_read_parked(site: Site) -> None:
    for path in ("/segments", f"/segments/{site.segment_id}", "/topics", "/properties"):
        assert await site.blocking_reads(path) == [], path


async def test_the_webhooks_and_suppressions_pages_read_parked(site: Site) -> None:
    for path in ("/webhooks", f"/webhooks/{site.webhook_id}", "/suppressions?q=gone"):
        assert await site.blocking_reads(path) == [], path


async def test_the_second_factor_and_sso_pages_read_parked(site: Site) -> None:
    for path in ("/account/mfa", "/team/mfa", "/team/sso"):
        assert await site.blocking_reads(path) == [], path


async def test_the_metrics_page_reads_parked(site: Site) -> None:
    scoped = f"?domain={site.domain_id}&broadcast={site.broadcast_id}"
    for path in ("/metrics", "/metrics?range=90d", f"/metrics{scoped}"):
        assert await site.blocking_reads(path) == [], path
