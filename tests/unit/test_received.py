"""The `Received:` trace field of submitted mail: its clauses, and a client's HELO that cannot
break out of its comment or its field."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default
from email.utils import format_datetime
from zoneinfo import ZoneInfo

import pytest

from postwire.smtp.received import SubmissionTrace, protocol, received_field, rfc5322_date

NOW = datetime(2025, 10, 7, 12, 0, tzinfo=UTC)
TRACE = SubmissionTrace(
    helo="app.example.com",
    client_address="192.0.2.7",
    server_name="mx.postwire.test",
    extended=True,
    authenticated=True,
    tls_version="TLSv1.3",
    tls_cipher="TLS_AES_256_GCM_SHA384",
    tls_bits=256,
)


def test_the_field_postfix_style() -> None:
    assert received_field(TRACE, "0192f0a4-7b3c", NOW) == (
        b"Received: from app.example.com ([192.0.2.7])\r\n"
        b"\t(using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384 (256 bits))\r\n"
        b"\tby mx.postwire.test (Postwire) with ESMTPSA id 0192f0a4-7b3c;\r\n"
        b"\tTue, 07 Oct 2025 12:00:00 +0000"
    )


@pytest.mark.parametrize(
    ("extended", "tls", "authenticated", "keyword"),
    [
        (True, True, True, "ESMTPSA"),
        (True, True, False, "ESMTPS"),  # a trusted relay without AUTH
        (True, False, True, "ESMTPA"),
        (True, False, False, "ESMTP"),
        (False, True, False, "SMTP"),
    ],
)
def test_protocol(extended: bool, tls: bool, authenticated: bool, keyword: str) -> None:
    trace = replace(
        TRACE,
        extended=extended,
        authenticated=authenticated,
        tls_version="TLSv1.3" if tls else None,
    )
    assert protocol(trace) == keyword


@pytest.mark.parametrize(
    ("helo", "address", "first_line"),
    [
        ("[192.0.2.7]", "192.0.2.7", b"Received: from [192.0.2.7] ([192.0.2.7])"),
        (
            "[IPv6:2001:db8::1]",
            "2001:db8::1",
            b"Received: from [IPv6:2001:db8::1] ([IPv6:2001:db8::1])",
        ),
        (None, "192.0.2.7", b"Received: from [192.0.2.7]"),
        ("bad_name", "192.0.2.7", b"Received: from [192.0.2.7] (helo=bad_name)"),
        ("x\r\nBcc: a@b.test", "192.0.2.7", b"Received: from [192.0.2.7] (helo=x??Bcc:?a@b.test)"),
        ("a) (b\\", "192.0.2.7", b"Received: from [192.0.2.7] (helo=a???b?)"),
        ("h\u00e9llo", "192.0.2.7", b"Received: from [192.0.2.7] (helo=h?llo)"),
        ("[999.1.1.1]", "192.0.2.7", b"Received: from [192.0.2.7] (helo=[999.1.1.1])"),
        ("a" * 100, "192.0.2.7", b"Received: from [192.0.2.7] (helo=" + b"a" * 64 + b")"),
    ],
)
def test_helo(helo: str | None, address: str, first_line: bytes) -> None:
    field = received_field(replace(TRACE, helo=helo, client_address=address), "id1", NOW)
    assert field.split(b"\r\n")[0] == first_line
    # One field, whatever the HELO: it parses back as a lone Received header.
    parsed = message_from_bytes(field + b"\r\n\r\n", policy=default)
    assert list(parsed.keys()) == ["Received"]
    assert all(line[:1] == b"\t" for line in field.split(b"\r\n")[1:])


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2025, 10, 7, 12, 0, tzinfo=UTC),
        datetime(2024, 2, 29, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2027, 1, 3, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 6, 1, 2, 30, tzinfo=ZoneInfo("Europe/Paris")),  # written in UTC
    ],
)
def test_the_date_is_what_the_email_package_writes_in_utc(moment: datetime) -> None:
    assert rfc5322_date(moment) == format_datetime(moment.astimezone(UTC))
