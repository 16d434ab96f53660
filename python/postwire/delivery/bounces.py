"""What an SMTP reply or a failure to reach a server means for a message and its recipient.

`classify_reply` reads the enhanced status code (RFC 3463) first and the basic reply code
(RFC 5321) second; the reply text is never parsed, only carried as the diagnostic. An enhanced
code whose class disagrees with the reply code is ignored, as RFC 3463 requires them to agree
and the reply code is what SMTP itself acts on.

An `Outcome` has two views:
- `status`, what the engine does: `delivered`; `transient` (try again later); `permanent`
  (stop, the message bounced).
- the contract's bounce (`bounce_type`, `bounce_sub_type`), what the sender is told when the
  message bounces, now or after the retries ran out. `Permanent` is a hard bounce: the address
  itself cannot receive mail (recipient address codes 5.1.x, a disabled mailbox 5.2.1, a domain
  that does not exist or takes no mail), and only those addresses are suppressed
  (`should_suppress`). Everything else, a full mailbox or a policy block included, is
  `Transient`: the address may receive mail later.

A refusal of Postwire's own, made before the server was asked (an address it could not be
offered, a destination it does not connect to), is told as such (`local;` diagnostic, its own
message), never as the server's words.
"""

from dataclasses import dataclass
from typing import Final, Literal

import trio

from postwire.delivery.resolver import DestinationError, EnhancedStatus
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

DeliveryStatus = Literal["delivered", "transient", "permanent"]
BounceType = Literal["Permanent", "Transient", "Undetermined"]
BounceSubType = Literal[
    "General",
    "NoEmail",
    "MailboxFull",
    "MessageTooLarge",
    "ContentRejected",
    "AttachmentRejected",
    "Undetermined",
]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The classification of one delivery attempt for one recipient."""

    status: DeliveryStatus
    # None when delivered; otherwise what the sender is told if this ends in a bounce.
    bounce_type: BounceType | None
    bounce_sub_type: BounceSubType | None
    # The enhanced status code the classification rests on: the server's, or the one that
    # stands for a local failure; None when there was none to rely on.
    enhanced: EnhancedStatus | None
    # As the contract's diagnosticCode: "smtp; 550 5.1.1 user unknown".
    diagnostic: str
    # The bounce's message when Postwire itself refused to send (the server was never asked);
    # None: the sub-type's, which speak of the recipient's mail server.
    message: str | None = None

    def bounce(self) -> dict[str, object]:
        """The contract's `bounce` object of an email.bounced event."""
        if self.bounce_type is None or self.bounce_sub_type is None:
            raise ValueError("a delivered message has no bounce")
        return {
            "message": self.message or BOUNCE_MESSAGES[self.bounce_sub_type],
            "type": self.bounce_type,
            "subType": self.bounce_sub_type,
            "diagnosticCode": [self.diagnostic],
        }


BOUNCE_MESSAGES: Final[dict[BounceSubType, str]] = {
    "General": "The recipient's mail server rejected the email.",
    "NoEmail": "The recipient's email address does not exist.",
    "MailboxFull": "The recipient's mailbox is full.",
    "MessageTooLarge": "The email is larger than the recipient's mail server accepts.",
    "ContentRejected": "The recipient's mail server rejected the email's content or sender.",
    "AttachmentRejected": "The recipient's mail server rejected an attachment of the email.",
    "Undetermined": "The recipient's mail server rejected the email for an unknown reason.",
}

# (subject, detail) of an enhanced code -> sub-type; detail None covers the whole subject.
_SUB_TYPES: Final[dict[tuple[int, int | None], BounceSubType]] = {
    (1, 1): "NoEmail",  # bad destination mailbox address
    (1, 2): "NoEmail",  # bad destination system address: the domain does not exist
    (1, 3): "NoEmail",  # bad destination mailbox address syntax
    (1, 6): "NoEmail",  # destination mailbox has moved, no forwarding address
    (2, 2): "MailboxFull",
    (2, 3): "MessageTooLarge",  # message length exceeds administrative limit
    (3, 4): "MessageTooLarge",  # message too big for system
    (6, 1): "AttachmentRejected",  # media (a MIME part's type) not supported
    (6, None): "ContentRejected",  # message content or media status
    (7, None): "ContentRejected",  # security or policy status
}

# Permanent-class codes that say the recipient's address cannot receive mail: hard bounces.
# X.1.7 and X.1.8 concern the sender's address, so they are not among them.
_HARD_BOUNCES: Final[frozenset[tuple[int, int]]] = frozenset(
    {(1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (1, 6), (1, 10), (2, 1)}
)

# Basic reply codes, for replies without a (usable) enhanced code.
_BASIC_PERMANENT: Final[dict[int, tuple[BounceType, BounceSubType]]] = {
    521: ("Permanent", "General"),  # RFC 7504: the host accepts no mail
    552: ("Transient", "MailboxFull"),  # exceeded storage allocation
    553: ("Permanent", "NoEmail"),  # mailbox name not allowed
    556: ("Permanent", "General"),  # RFC 7504: the domain accepts no mail
}


def classify_reply(code: int, enhanced: EnhancedStatus | None, text: str) -> Outcome:
    """Classify a server's final reply to one recipient (or to the whole message)."""
    reply_class = code // 100
    diagnostic = _smtp_diagnostic(code, enhanced, text)  # what the server said, as it said it
    if enhanced is not None and enhanced[0] != reply_class:
        enhanced = None
    if reply_class == 2:
        return Outcome("delivered", None, None, enhanced, diagnostic)
    if enhanced is not None:
        return _from_enhanced(enhanced, diagnostic)
    if reply_class == 5:
        bounce_type, sub_type = _BASIC_PERMANENT.get(code, ("Undetermined", "Undetermined"))
        return Outcome("permanent", bounce_type, sub_type, None, diagnostic)
    if reply_class == 4:
        return Outcome("transient", "Transient", "General", None, diagnostic)
    # 1xx or 3xx as a final reply: the server broke the protocol; it may behave later.
    return Outcome("transient", "Undetermined", "Undetermined", None, diagnostic)


def classify_failure(exc: BaseException) -> Outcome:
    """Classify a failure to get a reply at all: DNS, connection, TLS, timeout.

    Unknown exceptions are transient and Undetermined, so that a fault on our side retries
    (and bounces only when the message is too old) instead of dropping the message.
    """
    if isinstance(exc, DestinationError):
        return _from_enhanced(exc.enhanced, f"dns; {exc}")
    if isinstance(exc, DeliveryError):
        return _classify_session_error(exc)
    if isinstance(exc, trio.TooSlowError | TimeoutError):
        return _from_enhanced((4, 4, 1), "network; timed out waiting for the server")
    if isinstance(exc, ConnectionRefusedError):
        return _from_enhanced((4, 4, 1), f"network; connection refused: {exc}")
    if isinstance(exc, trio.BrokenResourceError | trio.ClosedResourceError | OSError):
        return _from_enhanced((4, 4, 2), f"network; connection failed: {_describe(exc)}")
    return Outcome("transient", "Undetermined", "Undetermined", None, f"local; {_describe(exc)}")


def _classify_session_error(exc: DeliveryError) -> Outcome:
    """The outbound SMTP client's errors: the session failed before any recipient's reply."""
    if isinstance(exc, SessionRejected):
        return classify_reply(exc.code, exc.enhanced, str(exc))
    if isinstance(exc, SmtpTimeout):
        return _from_enhanced((4, 4, 1), f"network; {exc}")
    if isinstance(exc, ConnectionFailed):
        return _from_enhanced((4, 4, 2), f"network; connection failed: {exc}")
    if isinstance(exc, ProtocolError):
        return _from_enhanced((4, 5, 0), f"smtp; protocol error: {exc}")
    if isinstance(exc, TlsRequired):  # not a content verdict, so not X.7.x's ContentRejected
        return Outcome("transient", "Transient", "General", (4, 7, 5), f"tls; {exc}")
    if isinstance(exc, InvalidCommandArgument | DestinationRefused):
        # Postwire's refusal, not a reply: retrying cannot help, and the address may well be
        # fine (so not a hard bounce, which would suppress it).
        return Outcome(
            "permanent", "Transient", "General", exc.enhanced, f"local; {exc}",
            message=f"Postwire did not send the email: {exc}.",
        )  # fmt: skip
    status: EnhancedStatus = (4, 0, 0) if exc.transient else (5, 0, 0)
    return _from_enhanced(status, f"smtp; {exc}")


def should_suppress(outcome: Outcome) -> bool:
    """Whether the recipient's address goes on the suppression list: a hard bounce."""
    return outcome.status == "permanent" and outcome.bounce_type == "Permanent"


def _from_enhanced(enhanced: EnhancedStatus, diagnostic: str) -> Outcome:
    status_class, subject, detail = enhanced
    sub_type = _SUB_TYPES.get((subject, detail)) or _SUB_TYPES.get((subject, None), "General")
    if status_class == 2:
        return Outcome("delivered", None, None, enhanced, diagnostic)
    if status_class == 5:
        bounce_type: BounceType = "Permanent" if (subject, detail) in _HARD_BOUNCES else "Transient"
        return Outcome("permanent", bounce_type, sub_type, enhanced, diagnostic)
    return Outcome("transient", "Transient", sub_type, enhanced, diagnostic)


def _smtp_diagnostic(code: int, enhanced: EnhancedStatus | None, text: str) -> str:
    parts = [str(code)]
    if enhanced is not None:
        parts.append(".".join(map(str, enhanced)))
    if text:
        parts.append(" ".join(text.split()))  # one line, even for a multi-line reply
    return "smtp; " + " ".join(parts)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
