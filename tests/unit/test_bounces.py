"""Bounce classification: enhanced status codes first, basic reply codes second, never prose."""

import errno
import ssl

import pytest
import trio

from postwire.delivery.bounces import (
    BOUNCE_MESSAGES,
    Outcome,
    classify_failure,
    classify_reply,
    should_suppress,
)
from postwire.delivery.resolver import (
    DnsTemporaryError,
    NoMailHostError,
    NoSuchDomainError,
    NullMxError,
)
from postwire.errors import (
    ConnectionFailed,
    DeliveryError,
    DestinationRefused,
    InvalidCommandArgument,
    ProtocolError,
    SessionRejected,
    SmtpTimeout,
    TlsRequired,
)


@pytest.mark.parametrize(
    ("code", "enhanced", "status", "bounce_type", "sub_type", "suppress"),
    [
        # Accepted.
        (250, (2, 0, 0), "delivered", None, None, False),
        (250, (2, 6, 0), "delivered", None, None, False),
        (251, None, "delivered", None, None, False),
        # Recipient address (5.1.x): hard bounces, suppressed.
        (550, (5, 1, 1), "permanent", "Permanent", "NoEmail", True),
        (550, (5, 1, 2), "permanent", "Permanent", "NoEmail", True),
        (501, (5, 1, 3), "permanent", "Permanent", "NoEmail", True),
        (550, (5, 1, 6), "permanent", "Permanent", "NoEmail", True),
        (550, (5, 1, 0), "permanent", "Permanent", "General", True),
        (550, (5, 1, 4), "permanent", "Permanent", "General", True),
        (556, (5, 1, 10), "permanent", "Permanent", "General", True),
        # ... except the sender's address (5.1.7, 5.1.8): not the recipient's fault.
        (553, (5, 1, 7), "permanent", "Transient", "General", False),
        (553, (5, 1, 8), "permanent", "Transient", "General", False),
        # Mailbox status (5.2.x).
        (550, (5, 2, 1), "permanent", "Permanent", "General", True),
        (552, (5, 2, 2), "permanent", "Transient", "MailboxFull", False),
        (552, (5, 2, 3), "permanent", "Transient", "MessageTooLarge", False),
        (550, (5, 2, 0), "permanent", "Transient", "General", False),
        # Mail system (5.3.x), routing (5.4.x), protocol (5.5.x).
        (552, (5, 3, 4), "permanent", "Transient", "MessageTooLarge", False),
        (554, (5, 3, 0), "permanent", "Transient", "General", False),
        (554, (5, 4, 4), "permanent", "Transient", "General", False),
        (500, (5, 5, 2), "permanent", "Transient", "General", False),
        # Content (5.6.x) and policy (5.7.x).
        (554, (5, 6, 0), "permanent", "Transient", "ContentRejected", False),
        (554, (5, 6, 1), "permanent", "Transient", "AttachmentRejected", False),
        (550, (5, 7, 1), "permanent", "Transient", "ContentRejected", False),
        (550, (5, 7, 26), "permanent", "Transient", "ContentRejected", False),
        # Transient (4.x.x): retried; the sub-type says why if the retries run out.
        (450, (4, 2, 2), "transient", "Transient", "MailboxFull", False),
        (451, (4, 7, 1), "transient", "Transient", "ContentRejected", False),
        (421, (4, 4, 2), "transient", "Transient", "General", False),
        (450, (4, 1, 1), "transient", "Transient", "NoEmail", False),
        (452, (4, 3, 4), "transient", "Transient", "MessageTooLarge", False),
        # No enhanced code: the basic reply code decides.
        (421, None, "transient", "Transient", "General", False),
        (450, None, "transient", "Transient", "General", False),
        (452, None, "transient", "Transient", "General", False),
        (550, None, "permanent", "Undetermined", "Undetermined", False),
        (554, None, "permanent", "Undetermined", "Undetermined", False),
        (552, None, "permanent", "Transient", "MailboxFull", False),
        (553, None, "permanent", "Permanent", "NoEmail", True),
        (521, None, "permanent", "Permanent", "General", True),
        (556, None, "permanent", "Permanent", "General", True),
        # An enhanced code whose class disagrees with the reply code is ignored.
        (450, (5, 1, 1), "transient", "Transient", "General", False),
        (550, (4, 2, 2), "permanent", "Undetermined", "Undetermined", False),
        (250, (5, 1, 1), "delivered", None, None, False),
        # A final reply that is no final reply: the server broke the protocol.
        (354, None, "transient", "Undetermined", "Undetermined", False),
    ],
)
def test_classify_reply(
    code: int,
    enhanced: tuple[int, int, int] | None,
    status: str,
    bounce_type: str | None,
    sub_type: str | None,
    suppress: bool,
) -> None:
    outcome = classify_reply(code, enhanced, "whatever the server says")
    assert (outcome.status, outcome.bounce_type, outcome.bounce_sub_type) == (
        status,
        bounce_type,
        sub_type,
    )
    assert should_suppress(outcome) is suppress


@pytest.mark.parametrize(
    "text",
    ["user unknown", "mailbox full, try later", "OK delivered", "spam detected", ""],
)
def test_text_never_changes_the_class(text: str) -> None:
    reference = classify_reply(550, (5, 7, 1), "")
    outcome = classify_reply(550, (5, 7, 1), text)
    assert (outcome.status, outcome.bounce_type, outcome.bounce_sub_type) == (
        reference.status,
        reference.bounce_type,
        reference.bounce_sub_type,
    )


@pytest.mark.parametrize(
    ("code", "enhanced", "text", "diagnostic"),
    [
        (550, (5, 1, 1), "user unknown", "smtp; 550 5.1.1 user unknown"),
        (421, None, "try later", "smtp; 421 try later"),
        (450, (4, 2, 2), "full\r\n  really full", "smtp; 450 4.2.2 full really full"),
        (550, (4, 2, 2), "odd", "smtp; 550 4.2.2 odd"),  # carried as said, even when ignored
        (250, None, "", "smtp; 250"),
    ],
)
def test_diagnostic_carries_the_reply(
    code: int, enhanced: tuple[int, int, int] | None, text: str, diagnostic: str
) -> None:
    assert classify_reply(code, enhanced, text).diagnostic == diagnostic


def test_bounce_object_follows_the_contract() -> None:
    outcome = classify_reply(550, (5, 1, 1), "user unknown")
    assert outcome.bounce() == {
        "message": BOUNCE_MESSAGES["NoEmail"],
        "type": "Permanent",
        "subType": "NoEmail",
        "diagnosticCode": ["smtp; 550 5.1.1 user unknown"],
    }
    with pytest.raises(ValueError):
        classify_reply(250, None, "ok").bounce()


@pytest.mark.parametrize(
    ("exc", "status", "bounce_type", "sub_type", "enhanced", "prefix"),
    [
        (NullMxError("x.test", "x.test accepts no mail (null MX)"),
         "permanent", "Permanent", "General", (5, 1, 10), "dns; x.test accepts no mail"),
        (NoSuchDomainError("x.test", "x.test does not exist"),
         "permanent", "Permanent", "NoEmail", (5, 1, 2), "dns; x.test does not exist"),
        (NoMailHostError("x.test", "no mail host"),
         "permanent", "Transient", "General", (5, 4, 4), "dns; no mail host"),
        (DnsTemporaryError("x.test", "SERVFAIL"),
         "transient", "Transient", "General", (4, 4, 3), "dns; SERVFAIL"),
        (trio.TooSlowError(), "transient", "Transient", "General", (4, 4, 1), "network; timed out"),
        (TimeoutError(), "transient", "Transient", "General", (4, 4, 1), "network; timed out"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
         "transient", "Transient", "General", (4, 4, 1), "network; connection refused"),
        (ConnectionResetError(errno.ECONNRESET, "reset"),
         "transient", "Transient", "General", (4, 4, 2), "network; connection failed"),
        (OSError(errno.ENETUNREACH, "unreachable"),
         "transient", "Transient", "General", (4, 4, 2), "network; connection failed"),
        (ssl.SSLError("handshake failed"),
         "transient", "Transient", "General", (4, 4, 2), "network; connection failed"),
        (trio.BrokenResourceError(),
         "transient", "Transient", "General", (4, 4, 2), "network; connection failed"),
        (SessionRejected("no", code=554, enhanced=(5, 7, 1)),
         "permanent", "Transient", "ContentRejected", (5, 7, 1), "smtp; 554 5.7.1 no"),
        (SessionRejected("busy", code=421),
         "transient", "Transient", "General", None, "smtp; 421 busy"),
        (SmtpTimeout("greeting", 300),
         "transient", "Transient", "General", (4, 4, 1), "network; SMTP greeting timed out"),
        (ConnectionFailed("lost"),
         "transient", "Transient", "General", (4, 4, 2), "network; connection failed: lost"),
        (ProtocolError("garbage"),
         "transient", "Transient", "General", (4, 5, 0), "smtp; protocol error: garbage"),
        (TlsRequired("no STARTTLS"),
         "transient", "Transient", "General", (4, 7, 5), "tls; no STARTTLS"),
        (InvalidCommandArgument("CR in address"),
         "permanent", "Transient", "General", (5, 5, 4), "local; CR in address"),
        (InvalidCommandArgument("not ASCII", enhanced=(5, 6, 7)),
         "permanent", "Transient", "General", (5, 6, 7), "local; not ASCII"),
        (DeliveryError("other", transient=False),
         "permanent", "Transient", "General", (5, 0, 0), "smtp; other"),
        (RuntimeError("a bug"),
         "transient", "Undetermined", "Undetermined", None, "local; RuntimeError: a bug"),
    ],
)  # fmt: skip
def test_classify_failure(
    exc: BaseException,
    status: str,
    bounce_type: str,
    sub_type: str,
    enhanced: tuple[int, int, int] | None,
    prefix: str,
) -> None:
    outcome = classify_failure(exc)
    assert isinstance(outcome, Outcome)
    assert (outcome.status, outcome.bounce_type, outcome.bounce_sub_type) == (
        status,
        bounce_type,
        sub_type,
    )
    assert outcome.enhanced == enhanced
    assert outcome.diagnostic.startswith(prefix)


def test_only_a_null_mx_or_missing_domain_suppresses_among_failures() -> None:
    suppressed = [
        type(exc).__name__
        for exc in (
            NullMxError("x.test", "null MX"),
            NoSuchDomainError("x.test", "NXDOMAIN"),
            NoMailHostError("x.test", "no host"),
            DnsTemporaryError("x.test", "SERVFAIL"),
            TimeoutError(),
        )
        if should_suppress(classify_failure(exc))
    ]
    assert suppressed == ["NullMxError", "NoSuchDomainError"]


def test_postwires_own_refusal_is_not_told_as_the_servers() -> None:
    refusal = InvalidCommandArgument(
        "the address 'josé@example.org' is not ASCII and the recipient's mail server does not"
        " offer SMTPUTF8",
        enhanced=(5, 6, 7),
    )
    outcome = classify_failure(refusal)
    bounce = outcome.bounce()
    assert bounce["message"] == (
        "Postwire did not send the email: the address 'josé@example.org' is not ASCII and the"
        " recipient's mail server does not offer SMTPUTF8."
    )
    assert bounce["diagnosticCode"] == [f"local; {refusal}"]
    assert not any(bounce["message"] == told for told in BOUNCE_MESSAGES.values())
    # The address may be fine: no hard bounce, so it is not suppressed.
    assert not should_suppress(outcome)


def test_a_refused_destination_is_postwires_own_permanent_refusal() -> None:
    refusal = DestinationRefused("mail for example.org would go to 127.0.0.1 (a loopback address)")
    outcome = classify_failure(refusal)
    assert (outcome.status, outcome.enhanced) == ("permanent", (5, 4, 4))
    bounce = outcome.bounce()
    assert bounce["message"] == f"Postwire did not send the email: {refusal}."
    assert bounce["diagnosticCode"] == [f"local; {refusal}"]
    assert not should_suppress(outcome)
