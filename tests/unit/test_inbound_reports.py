"""The DSN and ARF parser on realistic samples, malformed input, and VERP addresses."""

from __future__ import annotations

from pathlib import Path

import pytest

from postwire.inbound.apply import dsn_outcome
from postwire.inbound.reports import (
    DeliveryStatusReport,
    FeedbackReport,
    RecipientStatus,
    parse_report,
    verp_email_id,
)

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


def test_verp_email_id() -> None:
    assert verp_email_id(VERP) == EMAIL_ID
    assert verp_email_id(f"<{VERP}>") == EMAIL_ID
    assert verp_email_id(VERP.upper()) == EMAIL_ID


@pytest.mark.parametrize(
    "address",
    [
        "bounces@send.sender.test",
        f"bounces+{EMAIL_ID}x@send.sender.test",
        f"bounces+{EMAIL_ID[:-1]}@send.sender.test",
        f"bounces+../{EMAIL_ID}@send.sender.test",
        f"bounces+{EMAIL_ID}/x@send.sender.test",
        f"bounces+{EMAIL_ID}@send.sender.test\r\nRCPT TO:<x@y>",
        f"bounces+{EMAIL_ID}@",
        f"bounces+{EMAIL_ID}@a b",
        f"other+{EMAIL_ID}@send.sender.test",
        f"bounces+{EMAIL_ID.replace('a', 'g')}@send.sender.test",
    ],
)
def test_forged_verp_addresses_name_no_email(address: str) -> None:
    assert verp_email_id(address) is None


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
