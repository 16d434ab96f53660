"""Account mail: signed with the key of the domain `auth.mail_from` is under and spooled as
nobody's (no email record of the team, untracked), its link never logged; or its link written to
the log when there is no such sender. Its delivery outcomes move nothing of any team."""

from __future__ import annotations

import dataclasses
import logging
import re
from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default
from pathlib import Path

import pytest

from postwire._core import WriteBatch
from postwire.accounts.system_mail import SystemMailer, invitation_mail, password_reset_mail
from postwire.config import AuthConfig, Config
from postwire.delivery.bounces import classify_reply
from postwire.delivery.outcome_events import add_outcomes
from postwire.domains.store import create_domain, save_domain
from postwire.inbound.apply import (
    InboundAddress,
    apply_report,
    load_return_path_key,
    recognise_address,
)
from postwire.inbound.reports import DeliveryStatusReport, RecipientStatus
from postwire.store.accounts import create_team
from postwire.store.deliveries import (
    DELIVERIES,
    EVENTS,
    OUTBOX,
    SUPPRESSIONS,
    SYSTEM_OWNER,
    DeliveryRecord,
)
from postwire.store.emails import EMAILS, list_emails
from postwire.store.spool import Spool

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
LINK = "http://localhost:3001/invite/abc.def"


def _config(tmp_path: Path, mail_from: str) -> Config:
    return Config(data_dir=tmp_path, auth=AuthConfig(mail_from=mail_from))


async def test_without_a_sender_the_link_is_logged(
    spool: Spool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mail = invitation_mail("bo@example.net", "Acme", "Ada", "admin", LINK)
    for mail_from in ("", "Postwire <accounts@unverified.example>"):
        caplog.clear()
        mailer = SystemMailer(_config(tmp_path, mail_from), spool)
        with caplog.at_level(logging.WARNING, logger="postwire.accounts.mail"):
            assert not await mailer.send(mail, NOW)
        assert f"invitation link for bo@example.net: {LINK}" in caplog.text


async def test_mail_from_a_verified_domain_is_spooled_as_nobodys(
    spool: Spool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path, "Postwire <accounts@mail.example.com>")
    team = await create_team(spool, "Operators", NOW)
    domain = await create_domain(spool, config, team.id, "example.com", click_tracking=True)
    await save_domain(spool, dataclasses.replace(domain, status="verified"))
    mailer = SystemMailer(config, spool)
    link = "http://localhost:3001/reset/abc.def"
    with caplog.at_level(logging.DEBUG, logger="postwire.accounts.mail"):
        assert await mailer.send(password_reset_mail("cy@example.net", link), NOW)
    assert link not in caplog.text
    assert re.search(
        r"system mail \S+ accepted: password reset link to cy@example.net", caplog.text
    )
    assert list_emails(spool, team.id, limit=10, after=None, before=None) == ([], False)
    assert EMAILS.scan(spool, limit=10) == []
    ((message_id, delivery),) = DELIVERIES.scan(spool, limit=10)
    assert delivery.is_system and delivery.recipients == ["cy@example.net"]
    assert delivery.domain_id is None and delivery.tags == []
    message = spool.message_body(message_id)
    assert message is not None and message.startswith(b"DKIM-Signature:")
    assert b"d=example.com;" in message[:400]
    html = message_from_bytes(message, policy=default).get_body(("html",))
    assert html is not None and f'href="{link}"' in html.get_content()  # not the click redirect


async def test_outcomes_of_system_mail_move_nothing_of_a_team(
    spool: Spool, caplog: pytest.LogCaptureFixture
) -> None:
    delivery = DeliveryRecord(SYSTEM_OWNER, "bounces@example.com", ["a@x.example", "b@x.example"],
                              "opportunistic")  # fmt: skip
    outcomes = {
        "a@x.example": classify_reply(250, (2, 0, 0), "ok"),
        "b@x.example": classify_reply(550, (5, 1, 1), "no such user"),
    }
    batch = WriteBatch()
    with caplog.at_level(logging.INFO, logger="postwire.delivery"):
        updated, last_event = add_outcomes(batch, "m1", delivery, outcomes, None, 1_000)
    await spool.commit(batch)
    assert last_event is None
    assert updated.finished == {"a@x.example": "delivered", "b@x.example": "bounced"}
    for table in (EVENTS, OUTBOX, SUPPRESSIONS):
        assert table.scan(spool, limit=10) == []
    assert spool.scan("counters", limit=10) == []
    assert "system mail m1 to b@x.example bounced" in caplog.text


async def test_a_bounce_report_of_system_mail_suppresses_nobody(
    spool: Spool, tmp_path: Path
) -> None:
    config = _config(tmp_path, "Postwire <accounts@mail.example.com>")
    team = await create_team(spool, "Operators", NOW)
    domain = await create_domain(spool, config, team.id, "example.com")
    await save_domain(spool, dataclasses.replace(domain, status="verified"))
    mail = password_reset_mail("cy@example.net", "http://localhost:3001/reset/abc.def")
    assert await SystemMailer(config, spool).send(mail, NOW)
    ((message_id, delivery),) = DELIVERIES.scan(spool, limit=10)
    # A DSN to the message's own return path, quoting it: as valid as reports come.
    failed = RecipientStatus("failed", "cy@example.net", "cy@example.net", (5, 1, 1),
                             "smtp; 550 5.1.1 user unknown", "mx.example.net")  # fmt: skip
    report = DeliveryStatusReport(
        "mx.example.net", (failed,), delivery.envelope_from, f"<{message_id}@example.com>"
    )
    key = await load_return_path_key(spool, config)
    now_ms = int(NOW.timestamp() * 1000)
    assert recognise_address(spool, key, delivery.envelope_from, now_ms) is InboundAddress.REPORTS
    assert await apply_report(spool, key, report, delivery.envelope_from, now_ms) is None
    for table in (EVENTS, OUTBOX, SUPPRESSIONS):
        assert table.scan(spool, limit=10) == []
