"""Account mail: accepted as the team that verified `auth.mail_from`'s domain (signed, spooled,
untracked), or its link written to the log when there is no such sender."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from postwire.accounts.system_mail import SystemMailer, invitation_mail, password_reset_mail
from postwire.config import AuthConfig, Config
from postwire.domains.store import create_domain, save_domain
from postwire.store.accounts import create_team
from postwire.store.emails import list_emails
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


async def test_mail_from_a_verified_domain_is_accepted_untracked(
    spool: Spool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path, "Postwire <accounts@mail.example.com>")
    team = await create_team(spool, "Operators", NOW)
    domain = await create_domain(spool, config, team.id, "example.com", click_tracking=True)
    await save_domain(spool, dataclasses.replace(domain, status="verified"))
    mailer = SystemMailer(config, spool)
    link = "http://localhost:3001/reset/abc.def"
    with caplog.at_level(logging.WARNING, logger="postwire.accounts.mail"):
        assert await mailer.send(password_reset_mail("cy@example.net", link), NOW)
    assert link not in caplog.text
    (email,), _ = list_emails(spool, team.id, limit=10, after=None, before=None)
    assert email.to == ["cy@example.net"] and email.subject == "Reset your Postwire password"
    assert email.sender == "Postwire <accounts@mail.example.com>"
    message = spool.message_body(email.id)
    assert message is not None and message.startswith(b"DKIM-Signature:")
    assert email.html is not None and f'href="{link}"' in email.html  # not the click redirect
    assert email.text is not None and link in email.text
