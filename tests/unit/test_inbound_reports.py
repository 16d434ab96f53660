"""The DSN and ARF parser on realistic samples and malformed input; VERP return paths, their
tags and the age of untagged ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from postwire.inbound.apply import dsn_outcome
from postwire.inbound.reports import (
    DeliveryStatusReport,
    FeedbackReport,
    RecipientStatus,
    parse_report,
)
from postwire.inbound.verp import (
    LEGACY_MARGIN,
    ReturnPathKey,
    legacy_return_path_alive,
    parse_verp,
    tag_matches,
    verp_address,
)
from postwire.store.accounts import contract_timestamp
from postwire.store.emails import EmailRecord

SAMPLES = Path(__file__).parent.parent / "data" / "inbound"
EMAIL_ID = "0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f"
VERP = f"bounces+{EMAIL_ID}@send.sender.test"


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def test_postfix_failed_dsn_has_every_field() -> None:
    report = parse_report(sample("postfix-failed.eml"))
    assert report == DeliveryStatusReport(
        reporting_mta="mx.example.org",
        recipients=(
            RecipientStatus(
                action="failed",
                final_recipient="nobody@example.org",
                original_recipient="nobody@example.org",
                status=(5, 1, 1),
                diagnostic_code="smtp; 550 5.1.1 <nobody@example.org>: Recipient address "
                "rejected: User unknown in virtual mailbox table",
                remote_mta="mail.example.org",
            ),
        ),
        original_return_path=VERP,
        original_message_id=f"<{EMAIL_ID}@sender.test>",
    )


def test_postfix_delayed_dsn() -> None:
    report = parse_report(sample("postfix-delayed.eml"))
    assert isinstance(report, DeliveryStatusReport)
    (status,) = report.recipients
    assert status.action == "delayed"
    assert status.status == (4, 4, 1)
    assert status.final_recipient == "slow@example.net"
    assert status.diagnostic_code is not None
    assert status.diagnostic_code.startswith("X-Postfix; connect to mx.example.net")
    assert report.reporting_mta == "relay.example.net"


def test_exchange_dsn_with_crlf_and_returned_message() -> None:
    report = parse_report(sample("exchange-failed.eml"))
    assert isinstance(report, DeliveryStatusReport)
    (status,) = report.recipients
    assert status.final_recipient == status.original_recipient == "Gone.User@contoso.example"
    assert status.status == (5, 1, 10)
    assert status.diagnostic_code == (
        "smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup"
    )
    assert status.remote_mta is None
    assert report.original_return_path == VERP
    assert report.original_message_id == f"<{EMAIL_ID}@sender.test>"


def test_arf_abuse_report() -> None:
    assert parse_report(sample("arf-abuse.eml")) == FeedbackReport(
        feedback_type="abuse",
        user_agent="SomeGenerator/1.0",
        original_mail_from=VERP,
        original_rcpt_to=("angry@mailbox.example",),
        original_return_path=VERP,
        original_message_id=f"<{EMAIL_ID}@sender.test>",
    )


@pytest.mark.parametrize(
    "name",
    [
        "malformed-no-status-part.eml",
        "malformed-bad-fields.eml",
        "malformed-arf-no-type.eml",
        "malformed-truncated.eml",
    ],
)
def test_malformed_samples_give_none(name: str) -> None:
    assert parse_report(sample(name)) is None


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x00\xff\xfe garbage",
        b"Subject: hi\r\n\r\nplain mail",
        b"Content-Type: multipart/report; report-type=delivery-status\r\n\r\nno boundary",
        b"Content-Type: multipart/mixed; boundary=a\r\n\r\n"
        b"--a\r\nContent-Type: text/plain\r\n\r\nx\r\n--a--",
        sample("postfix-failed.eml")[:700],
        sample("postfix-failed.eml").replace(b"Status: 5.1.1", b"Status: 5.1.1"[:6]),
    ],
)
def test_junk_gives_none_or_a_report_never_an_exception(message: bytes) -> None:
    report = parse_report(message)
    assert report is None or isinstance(report, DeliveryStatusReport)


def test_status_field_that_does_not_parse_is_dropped() -> None:
    message = sample("postfix-failed.eml").replace(b"Status: 5.1.1", b"Status: 5.1.1234")
    report = parse_report(message)
    assert isinstance(report, DeliveryStatusReport)
    assert report.recipients[0].status is None


SECRET = bytes(range(32))
HOST = "send.sender.test"
TAGGED = verp_address(SECRET, EMAIL_ID, HOST)


def test_return_paths_are_tagged_and_fit_a_local_part() -> None:
    local, _, host = TAGGED.partition("@")
    assert host == HOST
    assert len(local) <= 64  # RFC 5321 4.5.3.1.1
    assert TAGGED.islower()  # unchanged by MTAs that lowercase local parts
    verp = parse_verp(TAGGED)
    assert verp is not None and verp.tag is not None
    assert (verp.email_id, verp.host, verp.address) == (EMAIL_ID, HOST, TAGGED)
    assert tag_matches(SECRET, verp)
    # Angle brackets and any change of case still name the same return path.
    assert parse_verp(f"<{TAGGED.upper()}>") == verp
    assert verp_address(SECRET, EMAIL_ID.upper(), HOST.upper()) == TAGGED


def _last_tag_character_changed(address: str) -> str:
    local, _, host = address.partition("@")
    return f"{local[:-1]}{'b' if local[-1] == 'a' else 'a'}@{host}"


@pytest.mark.parametrize(
    "address",
    [
        pytest.param(verp_address(b"x" * 32, EMAIL_ID, HOST), id="another secret"),
        pytest.param(
            TAGGED.replace(EMAIL_ID, "0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e70"), id="another email"
        ),
        pytest.param(TAGGED.replace(HOST, "send.other.test"), id="another host"),
        pytest.param(_last_tag_character_changed(TAGGED), id="one character changed"),
        pytest.param(VERP, id="untagged"),
    ],
)
def test_tags_made_without_the_secret_do_not_match(address: str) -> None:
    verp = parse_verp(address)
    assert verp is not None
    assert not tag_matches(SECRET, verp)


@pytest.mark.parametrize(
    "address",
    [
        "bounces@send.sender.test",
        f"bounces+{EMAIL_ID}x@send.sender.test",
        f"bounces+{EMAIL_ID[:-1]}@send.sender.test",
        f"bounces+../{EMAIL_ID}@send.sender.test",
        f"bounces+{EMAIL_ID}/x@send.sender.test",
        f"bounces+{EMAIL_ID}@send.sender.test\r\nRCPT TO:<x@y>",
        f"{TAGGED}\r\nRCPT TO:<x@y>",
        f"bounces+{EMAIL_ID}@",
        f"bounces+{EMAIL_ID}@a b",
        f"other+{EMAIL_ID}@send.sender.test",
        f"bounces+{EMAIL_ID.replace('a', 'g')}@send.sender.test",
        f"bounces+{EMAIL_ID}-{'a' * 15}@send.sender.test",  # a tag too short
        f"bounces+{EMAIL_ID}-{'a' * 17}@send.sender.test",  # too long
        f"bounces+{EMAIL_ID}-{'a' * 15}1@send.sender.test",  # not base32
        f"bounces+{EMAIL_ID}-@send.sender.test",
    ],
)
def test_other_addresses_are_no_return_paths(address: str) -> None:
    assert parse_verp(address) is None


LEGACY_KEY = ReturnPathKey(SECRET, timedelta(hours=72) + LEGACY_MARGIN)
SENT = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _email_at(created: datetime, scheduled: datetime | None = None) -> EmailRecord:
    return EmailRecord(
        id=EMAIL_ID, team_id="team-1", domain_id="domain-1", sender="shop@sender.test",
        to=["ann@example.org"], subject="Hi", message_id=f"<{EMAIL_ID}@sender.test>",
        created_at=contract_timestamp(created), last_event="delivered", envelope_from=VERP,
        recipients=["ann@example.org"],
        scheduled_at=None if scheduled is None else contract_timestamp(scheduled),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("record", "after", "alive"),
    [
        (_email_at(SENT), timedelta(0), True),
        (_email_at(SENT), timedelta(days=10) - timedelta(milliseconds=1), True),
        (_email_at(SENT), timedelta(days=10), False),
        (_email_at(SENT), timedelta(days=365), False),
        # A scheduled email was sent when it was due: its age counts from then.
        (_email_at(SENT - timedelta(days=20), scheduled=SENT), timedelta(days=9), True),
        (_email_at(SENT - timedelta(days=20), scheduled=SENT), timedelta(days=10), False),
    ],
)
def test_untagged_return_paths_live_for_the_delivery_age_and_a_margin(
    record: EmailRecord, after: timedelta, alive: bool
) -> None:
    now_ms = int((SENT + after).timestamp() * 1000)
    assert legacy_return_path_alive(LEGACY_KEY, record, now_ms) is alive


def test_dsn_outcomes_classify_like_live_replies() -> None:
    report = parse_report(sample("postfix-failed.eml"))
    assert isinstance(report, DeliveryStatusReport)
    outcome = dsn_outcome(report.recipients[0])
    assert (outcome.status, outcome.bounce_type, outcome.bounce_sub_type) == (
        "permanent", "Permanent", "NoEmail",
    )  # fmt: skip
    assert outcome.bounce()["diagnosticCode"] == [report.recipients[0].diagnostic_code]
    delayed = parse_report(sample("postfix-delayed.eml"))
    assert isinstance(delayed, DeliveryStatusReport)
    assert dsn_outcome(delayed.recipients[0]).status == "transient"
