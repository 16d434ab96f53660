"""Table tests of the SMTP submission rules (no sockets)."""

from __future__ import annotations

import pytest

from postwire.errors import ApiError
from postwire.smtp import submission_policy as policy
from postwire.smtp.submission_policy import Reply, SessionFacts

ANONYMOUS = SessionFacts(authenticated=False, trusted_peer=False)
AUTHENTICATED = SessionFacts(authenticated=True, trusted_peer=False)
TRUSTED = SessionFacts(authenticated=False, trusted_peer=True)


@pytest.mark.parametrize(
    ("username", "key_found", "expected"),
    [
        ("postwire", True, None),
        ("postwire", False, policy.AUTH_INVALID),
        ("resend", True, policy.AUTH_INVALID),
        ("", True, policy.AUTH_INVALID),
    ],
)
def test_on_auth(username: str, key_found: bool, expected: Reply | None) -> None:
    assert policy.on_auth(username, key_found) == expected


@pytest.mark.parametrize(
    ("from_source", "with_credential", "limit", "expected"),
    [
        (0, 0, 10, None),
        (9, 9, 10, None),
        (10, 10, 10, policy.AUTH_CREDENTIAL_LOCKED),
        # Other keys failed from this source (a shared NAT): this one still gets in.
        (60, 0, 10, None),
        (99, 9, 10, None),
        (100, 0, 10, policy.AUTH_TOO_MANY_FAILURES),  # the source's ceiling: spraying keys
        (1000, 1000, 0, None),  # no limit
    ],
)
def test_on_auth_attempt(
    from_source: int, with_credential: int, limit: int, expected: Reply | None
) -> None:
    assert policy.on_auth_attempt(from_source, with_credential, limit) == expected
    if expected is not None:
        assert expected[:2] == (454, "4.7.0")  # transient: the client may come back later


def test_auth_credential_names_the_key_not_the_secret() -> None:
    token = "re_AbCdEfGh_" + "s" * 24
    guess = "re_AbCdEfGh_" + "g" * 24
    other = "re_ZyXwVuTs_" + "s" * 24
    credential = policy.auth_credential("postwire", token)
    assert policy.auth_credential("postwire", guess) == credential, "guesses at one key"
    assert policy.auth_credential("postwire", other) != credential
    assert policy.auth_credential("resend", token) != credential
    assert "s" * 24 not in credential and "AbCdEfGh" not in credential
    assert policy.auth_credential("postwire", "hunter2") != policy.auth_credential("postwire", "x")


@pytest.mark.parametrize("session", [ANONYMOUS, AUTHENTICATED, TRUSTED])
def test_on_mail_leaves_the_decision_to_rcpt(session: SessionFacts) -> None:
    assert policy.on_mail(session) is None


@pytest.mark.parametrize(
    ("session", "inbound_address", "expected"),
    [
        (ANONYMOUS, True, True),
        (TRUSTED, True, True),
        (AUTHENTICATED, True, False),  # sent on like any recipient
        (ANONYMOUS, False, False),
        (TRUSTED, False, False),
    ],
)
def test_is_inbound(session: SessionFacts, inbound_address: bool, expected: bool) -> None:
    assert policy.is_inbound(session, inbound_address) is expected


@pytest.mark.parametrize(
    ("address", "refused_because"),
    [
        ("ann@example.org", None),
        ("ann@mail.example.org", None),
        ("jöse@bücher.example", None),  # an IDN, sent as its A-label
        ("<>", "null path"),
        ("", "null path"),
        ("not an address", "Not an email address"),
        ("x@y", "single-label"),
        ("x@localhost", "single-label"),
        ("x@[127.0.0.1]", "Address literals"),
        ("x@[IPv6:::1]", "Address literals"),
        ("x@127.0.0.1", "Not an email address"),  # an IP address without brackets
        ("x@a.localhost", ".localhost"),
        ("x@host.local", ".local"),
        ("x@host.local.", ".local"),
        ("x@db.internal", ".internal"),
        ("x@box.localdomain", ".localdomain"),
        ("x@nas.home.arpa", ".home.arpa"),
        ('"quoted"@example.org', "Not an email address"),
        ("a..b@example.org", "Not an email address"),
    ],
)
def test_on_rcpt_address(address: str, refused_because: str | None) -> None:
    reply = policy.on_rcpt_address(address)
    if refused_because is None:
        assert reply is None
    else:
        assert reply is not None and reply[:2] == (501, "5.1.3")
        assert refused_because in reply[2]


@pytest.mark.parametrize(
    ("session", "so_far", "inbound", "transaction_inbound", "expected"),
    [
        (ANONYMOUS, 0, False, None, policy.RELAYING_DENIED),
        (ANONYMOUS, 0, True, None, None),
        (ANONYMOUS, 1, True, True, None),
        (ANONYMOUS, 1, False, True, policy.RELAYING_DENIED),
        (AUTHENTICATED, 0, False, None, None),
        (TRUSTED, 0, False, None, None),
        (TRUSTED, 0, True, None, None),
        (TRUSTED, 1, True, False, policy.MIXED_RECIPIENTS),
        (TRUSTED, 1, False, True, policy.MIXED_RECIPIENTS),
        (AUTHENTICATED, 49, False, False, None),
        (AUTHENTICATED, 50, False, False, policy.TOO_MANY_RECIPIENTS),
        (TRUSTED, 50, False, False, policy.TOO_MANY_RECIPIENTS),
        (ANONYMOUS, 50, True, True, policy.TOO_MANY_RECIPIENTS),
        (ANONYMOUS, 50, False, None, policy.RELAYING_DENIED),
    ],
)
def test_on_rcpt(
    session: SessionFacts,
    so_far: int,
    inbound: bool,
    transaction_inbound: bool | None,
    expected: Reply | None,
) -> None:
    assert policy.on_rcpt(session, so_far, inbound, transaction_inbound) == expected


@pytest.mark.parametrize(
    ("message", "limit", "expected"),
    [
        (b"From: a@b.test\r\n\r\nhi\r\n", 100, None),
        (b"x" * 101, 100, policy.MESSAGE_TOO_BIG),
        (b"From: a@b.test\r\n\r\nh\x00i\r\n", 100, policy.NUL_IN_MESSAGE),
        (b"From: a@b.test\n\nhi\n", 100, policy.BARE_LF),
        (b"From: a@b.test\r\n\r\nh\ni\r\n", 100, policy.BARE_LF),
        (b"From: a@b.test\r\n\r\nh\ri\r\n", 100, policy.BARE_CR),
        (b"From: a@b.test\r\n\r\nhi\r", 100, policy.BARE_CR),
        (b"From: a@b.test\r\n\r\nhi\r.\rMAIL FROM:<x@y.test>\r\n", 100, policy.BARE_CR),
        (b"From: a@b.test\r\n\r\nhi\r\n.\nMAIL FROM:<x@y.test>\r\n", 100, policy.BARE_LF),
    ],
)
def test_on_data(message: bytes, limit: int, expected: Reply | None) -> None:
    assert policy.on_data(message, limit) == expected


@pytest.mark.parametrize(
    ("error", "code", "enhanced"),
    [
        (ApiError(403, "validation_error", "The `x.test` domain is not verified."), 550, "5.7.1"),
        (ApiError(409, "concurrent_idempotent_requests", "busy"), 451, "4.7.0"),
        (ApiError(409, "invalid_idempotent_request", "other body"), 550, "5.7.0"),
        (ApiError(422, "validation_error", "bad"), 550, "5.6.0"),
        (ApiError(503, "service_unavailable", "full"), 451, "4.3.0"),
    ],
)
def test_reply_for_refusal(error: ApiError, code: int, enhanced: str) -> None:
    assert policy.reply_for_refusal(error) == (code, enhanced, error.message)


def test_format_reply_and_accepted() -> None:
    assert policy.format_reply(policy.RELAYING_DENIED) == "550 5.7.1 relaying denied"
    assert policy.format_reply(policy.accepted("abc")) == "250 2.0.0 OK queued as abc"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '500 Error: command "FOO" not recognized',
            '500 5.5.2 Error: command "FOO" not recognized',
        ),
        ("503 Error: need MAIL command", "503 5.5.1 Error: need MAIL command"),
        ("501 Syntax: HELO hostname", "501 5.5.4 Syntax: HELO hostname"),
        ("502 EXPN not implemented", "502 5.5.1 EXPN not implemented"),
        ("454 TLS not available", "454 4.7.0 TLS not available"),
        ("421 Too many connections", "421 4.3.2 Too many connections"),
        ("458 Something else", "458 4.0.0 Something else"),
        # Replies that have one, and replies that take none (RFC 3463 covers 2xx, 4xx, 5xx).
        ("553 5.1.3 Error: malformed address", "553 5.1.3 Error: malformed address"),
        (
            "504 5.5.4 Unrecognized authentication type",
            "504 5.5.4 Unrecognized authentication type",
        ),
        ("250 OK", "250 OK"),
        ("354 End data with <CR><LF>.<CR><LF>", "354 End data with <CR><LF>.<CR><LF>"),
        ("220 mx.postwire.test Postwire ESMTP", "220 mx.postwire.test Postwire ESMTP"),
    ],
)
def test_with_enhanced_code(line: str, expected: str) -> None:
    assert policy.with_enhanced_code(line) == expected
