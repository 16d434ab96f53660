"""Tracking on a real spool: the secret in `meta`, tracked mail built and signed by `Acceptor`,
and opens and clicks recorded as events beside the email's `last_event`."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

import dkim
import trio

from postwire import _core
from postwire.accept import Acceptor
from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.api.send_request import parse_send_request
from postwire.config import load_config
from postwire.domains import store as domain_store
from postwire.store.deliveries import OUTBOX, email_events
from postwire.store.emails import EMAILS, email_key
from postwire.store.server_secrets import SERVER_SECRETS
from postwire.store.spool import TABLES, Spool
from postwire.webhooks.tracking import (
    SECRET_KEY,
    TrackedEmail,
    TrackedLink,
    Tracking,
    record_click,
    record_open,
    tracking_secret,
)

BASE = "https://mail.example.com"
TEAM = _core.new_id()
HTML = (
    '<html><body><p>Hi!</p><a href="https://shop.example/a?x=1&amp;y=2">shop</a> '
    '<a href="mailto:help@sender.test">help</a></body></html>'
)
TEXT = "Hi! Shop at https://shop.example/a?x=1&y=2"


@asynccontextmanager
async def open_spool(path: Path) -> AsyncIterator[Spool]:
    spool = Spool(_core.Spool(path, tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        yield spool
        nursery.cancel_scope.cancel()
    await spool.close()


async def verified_domain(
    spool: Spool, tmp_path: Path, *, opens: bool, clicks: bool
) -> domain_store.DomainRecord:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    domain = await domain_store.create_domain(spool, config, TEAM, "sender.test")
    domain = dataclasses.replace(
        domain, status="verified", open_tracking=opens, click_tracking=clicks
    )
    batch = _core.WriteBatch()
    domain_store.DOMAINS.put(batch, f"domain/{TEAM}/{domain.id}", domain)
    await spool.commit(batch)
    return domain


async def accept(spool: Spool, acceptor: Acceptor) -> tuple[str, bytes]:
    now = datetime.now(UTC)
    body = {"from": "shop@sender.test", "to": "ann@example.org", "subject": "Hi", "html": HTML}
    body["text"] = TEXT
    prepared = await acceptor.prepare(TEAM, None, parse_send_request(body, now=now), now)
    batch = _core.WriteBatch()
    acceptor.add_to_batch(batch, [prepared], now)
    await spool.commit(batch)
    return prepared.record.id, prepared.message


def parts(message: bytes) -> tuple[str, str]:
    parsed = email.message_from_bytes(message, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    html_part, text_part = parsed.get_body(("html",)), parsed.get_body(("plain",))
    assert html_part is not None and text_part is not None
    return str(html_part.get_content()), str(text_part.get_content())


def dkim_verifies(message: bytes, domain: domain_store.DomainRecord) -> bool:
    def txt(name: bytes, timeout: int = 5) -> bytes | None:
        wanted = f"{domain.dkim_selector}._domainkey.{domain.name}."
        return domain.dkim_dns_txt.encode() if name.decode() == wanted else None

    return bool(dkim.verify(message, dnsfunc=txt))


async def test_secret_is_made_once_and_kept(tmp_path: Path) -> None:
    async with open_spool(tmp_path / "spool") as spool:
        assert SERVER_SECRETS.get(spool, SECRET_KEY) is None
        secrets: list[bytes] = []

        async def take() -> None:
            secrets.append(await tracking_secret(spool))

        async with trio.open_nursery() as nursery:  # racing first uses agree on one secret
            for _ in range(5):
                nursery.start_soon(take)
        assert len(set(secrets)) == 1 and len(secrets[0]) == 32
        token = (await Tracking(spool, BASE).signer()).open_token(TEAM, TEAM)
    async with open_spool(tmp_path / "spool") as spool:
        assert await tracking_secret(spool) == secrets[0]
        assert (await Tracking(spool, BASE).signer()).read_open(token) is not None


async def test_tracked_mail_is_signed_over_the_rewritten_html(tmp_path: Path) -> None:
    async with open_spool(tmp_path / "spool") as spool:
        domain = await verified_domain(spool, tmp_path, opens=True, clicks=True)
        tracking = Tracking(spool, BASE + "/")
        email_id, message = await accept(spool, Acceptor(spool, tracking=tracking))
        assert dkim_verifies(message, domain)
        html, text = parts(message)
        signer = await tracking.signer()
        (click,) = re.findall(rf'href="{BASE}/t/c/([\w-]+)"', html)
        (pixel,) = re.findall(rf'<img src="{BASE}/t/o/([\w-]+)"', html)
        link = "https://shop.example/a?x=1&y=2"
        assert signer.read_click(click) == TrackedLink(TEAM, email_id, link)
        assert signer.read_open(pixel) == TrackedEmail(TEAM, email_id)
        assert 'href="mailto:help@sender.test"' in html
        assert text.rstrip("\n") == TEXT
        record = EMAILS.get(spool, email_key(TEAM, email_id))
        assert record is not None and record.html == HTML  # the API shows the HTML as sent


async def test_mail_of_a_domain_without_tracking_is_untouched(tmp_path: Path) -> None:
    async with open_spool(tmp_path / "spool") as spool:
        domain = await verified_domain(spool, tmp_path, opens=False, clicks=False)
        _, message = await accept(spool, Acceptor(spool, tracking=Tracking(spool, BASE)))
        assert dkim_verifies(message, domain)
        assert parts(message)[0].rstrip("\n") == HTML
        assert SERVER_SECRETS.get(spool, SECRET_KEY) is None  # not even the secret was needed


async def test_opens_and_clicks_are_events_and_last_event(tmp_path: Path) -> None:
    async with open_spool(tmp_path / "spool") as spool:
        await verified_domain(spool, tmp_path, opens=True, clicks=True)
        email_id, _ = await accept(spool, Acceptor(spool))

        def last_event() -> str | None:
            record = EMAILS.get(spool, email_key(TEAM, email_id))
            return None if record is None else record.last_event

        now = datetime(2026, 11, 24, 5, 0, 57, 163000, tzinfo=UTC)
        await record_open(spool, TrackedEmail(TEAM, email_id), now)
        assert last_event() == "opened"
        link = TrackedLink(TEAM, email_id, "https://shop.example/a?x=1&y=2")
        await record_click(spool, link, now, ip_address="192.0.2.7", user_agent="Mail/1.0")
        assert last_event() == "clicked"

        events = email_events(spool, TEAM, email_id)
        assert [event.type for event in events] == ["email.opened", "email.clicked"]
        assert events[0].data == {}
        assert events[1].data == {
            "click": {
                "ipAddress": "192.0.2.7",
                "link": "https://shop.example/a?x=1&y=2",
                "timestamp": "2026-11-24T05:00:57.163Z",
                "userAgent": "Mail/1.0",
            }
        }
        assert {OUTBOX.get(spool, event.id) is not None for event in events} == {True}


async def test_an_open_after_a_bounce_does_not_hide_it(tmp_path: Path) -> None:
    async with open_spool(tmp_path / "spool") as spool:
        await verified_domain(spool, tmp_path, opens=True, clicks=True)
        email_id, _ = await accept(spool, Acceptor(spool))
        key = email_key(TEAM, email_id)
        record = EMAILS.get(spool, key)
        assert record is not None
        batch = _core.WriteBatch()
        EMAILS.put(batch, key, dataclasses.replace(record, last_event="bounced"))
        await spool.commit(batch)

        now = datetime.now(UTC)
        await record_open(spool, TrackedEmail(TEAM, email_id), now)
        await record_click(
            spool, TrackedLink(TEAM, email_id, "https://a.b/"), now, ip_address="", user_agent=""
        )
        stored = EMAILS.get(spool, key)
        assert stored is not None and stored.last_event == "bounced"
        assert [e.type for e in email_events(spool, TEAM, email_id)] == [
            "email.opened",
            "email.clicked",
        ]


async def test_an_email_no_longer_kept_records_nothing(tmp_path: Path) -> None:
    async with open_spool(tmp_path / "spool") as spool:
        gone = _core.new_id()
        await record_open(spool, TrackedEmail(TEAM, gone), datetime.now(UTC))
        assert email_events(spool, TEAM, gone) == []


async def test_tracking_routes_are_public_and_never_rate_limited(tmp_path: Path) -> None:
    environ = {"POSTWIRE_DATA_DIR": str(tmp_path), "POSTWIRE_API_RATE_LIMIT": "1"}
    config = load_config(None, environ)
    async with open_spool(tmp_path / "spool") as spool:
        await verified_domain(spool, tmp_path, opens=True, clicks=True)
        ctx = ApiContext(config=config, spool=spool)
        email_id, message = await accept(spool, ctx.acceptor)
        html = parts(message)[0]
        base = re.escape(config.api.public_url)
        (pixel,) = re.findall(rf'<img src="{base}(/t/o/[\w-]+)"', html)
        (click,) = re.findall(rf'href="{base}(/t/c/[\w-]+)"', html)
        client = create_app(ctx).test_client()

        for _ in range(5):  # a team's limit is 1 a second; recipients are not its callers
            response = await client.get(pixel)
            assert response.status_code == 200
            assert "ratelimit-limit" not in response.headers
        scanned = await client.head(click)  # a link scanner's HEAD counts for nothing
        assert (scanned.status_code, scanned.headers["location"]) == (
            302,
            "https://shop.example/a?x=1&y=2",
        )
        assert [e.type for e in email_events(spool, TEAM, email_id)] == ["email.opened"] * 5
        assert (await client.get("/t/o/" + "A" * 64)).status_code == 404
        assert (await client.get("/t/c/")).status_code == 404
