"""Postwire's one exception tree.

Every layer translates the errors of the layer below it in exactly one place; callers catch these.
The Rust extension raises the classes defined here (it imports them), so there is no second tree.

    PostwireError
    ├── ConfigError              invalid or unknown configuration; names the key
    ├── ApiError                 a request is refused; carries the wire contract's
    │                            {"statusCode", "name", "message"}
    ├── MessageError             (also ValueError) a message cannot be built as asked
    │   └── HeaderInjectionError a header name or value holds CR, LF or NUL
    ├── DkimError                a key cannot be generated, parsed or used to sign
    ├── SpoolError               the durable spool failed; nothing of the write was kept
    │   ├── SpoolFullError       the map is full, or intake reached its reserve: back off
    │   │                        (SMTP 452 4.3.1, HTTP 503)
    │   ├── KeyExistsError       an insert found its key taken (idempotency races)
    │   ├── ConflictError        an asserted key changed since read (compare-and-set)
    │   ├── LeaseLostError       the lease expired or was taken over; do not ack
    │   ├── NoSuchMessageError   the message is not (or no longer) in the spool
    │   └── StoreUnavailableError the table store's server is unreachable (HTTP 503,
    │                            SMTP 451 4.3.0); a COMMIT cut off says its outcome is unknown
    └── DeliveryError            an outbound SMTP session failed; `transient` says retry or bounce
        ├── ConnectionFailed     connect refused/unreachable or the peer hung up (transient)
        ├── SmtpTimeout          a phase of the session timed out; names the phase (transient)
        ├── ProtocolError        the peer's bytes are not SMTP (transient: may be a broken box)
        ├── TlsRequired          policy asks for TLS the peer cannot give (transient, as Postfix
        │                        defers: certificates get fixed, a STARTTLS-stripper goes away)
        ├── SessionRejected      greeting, EHLO/HELO, AUTH or RSET refused; transient iff 4xx
        ├── InvalidCommandArgument  (also ValueError) an address holds CR, LF or NUL, or is
        │                        non-ASCII without SMTPUTF8: refused by Postwire (permanent)
        └── DestinationRefused   the recipient's domain leads only to loopback, private,
                                 link-local or this host's addresses: refused by Postwire
                                 (permanent)
"""


class PostwireError(Exception):
    """Root of every error Postwire raises on purpose."""


class ConfigError(PostwireError):
    """The configuration is invalid; the message names the offending key."""


class ApiError(PostwireError):
    """A REST request is refused with the contract's error body.

    `name` is one of the contract's error names (`validation_error`, `missing_api_key`,
    `not_found`, ...); `status` the HTTP status that goes with it.
    """

    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.name = name
        self.message = message

    def to_json(self) -> dict[str, object]:
        return {"statusCode": self.status, "name": self.name, "message": self.message}


def validation_error(message: str, status: int = 422) -> ApiError:
    """The contract's most common refusal: 422 `validation_error`."""
    return ApiError(status, "validation_error", message)


class MessageError(PostwireError, ValueError):
    """A message cannot be assembled from what was given."""


class HeaderInjectionError(MessageError):
    """A header name or value contains CR, LF or NUL."""


class DkimError(PostwireError):
    """DKIM key generation, parsing or signing failed."""


class SpoolError(PostwireError):
    """A spool operation failed; a failed write batch left nothing behind."""


class SpoolFullError(SpoolError):
    """The spool's map is full, or a batch that enqueues would reach the reserve kept for
    delivery's outcomes; callers answer with a temporary failure."""


class KeyExistsError(SpoolError):
    """An insert-if-absent found the key already present; nothing of its batch was written."""

    def __init__(self, message: str, table: str = "", key: bytes = b"") -> None:
        super().__init__(message)
        self.table = table
        self.key = key


class ConflictError(SpoolError):
    """A batch's assertion (`WriteBatch.assert_value`) found its key changed since it was read:
    another writer committed first. Nothing of the batch was written; read again and retry."""

    def __init__(self, message: str, table: str = "", key: bytes = b"") -> None:
        super().__init__(message)
        self.table = table
        self.key = key


class LeaseLostError(SpoolError):
    """The message's lease expired or another worker holds it now."""


class NoSuchMessageError(SpoolError):
    """The message is not in the spool (never was, or already delivered or removed)."""


class StoreUnavailableError(SpoolError):
    """The table store's server cannot be reached: refused, lost, or lost during a COMMIT
    (then whether the batch was written is unknown, and the message says so). Answer 503 /
    `451 4.3.0`; the store reconnects by itself when the server is back."""


class DeliveryError(PostwireError):
    """An outbound SMTP session failed; `transient` tells the retry policy to try again later.

    Refusals inside a transaction (MAIL, RCPT, DATA) are not errors: they are replies in the
    `Transaction`, classified per recipient from their code and enhanced status code.
    """

    transient: bool

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class ConnectionFailed(DeliveryError):
    """The TCP connection could not be made or was lost; always transient."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


class SmtpTimeout(DeliveryError):
    """A phase of the session (`phase`: connect, greeting, ehlo, mail, ...) timed out."""

    def __init__(self, phase: str, seconds: float) -> None:
        super().__init__(f"SMTP {phase} timed out after {seconds:g}s", transient=True)
        self.phase = phase
        self.seconds = seconds


class ProtocolError(DeliveryError):
    """The peer sent something that is not an SMTP reply (garbage, over-long lines)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


class TlsRequired(DeliveryError):
    """TLS is required by policy but not offered, refused or not verifiable for the host.

    Transient, like Postfix's deferral: the message is retried until its retry window ends,
    then bounced; it is never sent in clear.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


class SessionRejected(DeliveryError):
    """The peer refused the session itself (greeting, EHLO and HELO, AUTH, RSET).

    Transient iff the reply code is 4xx; `code` and `enhanced` are the peer's, never parsed
    from its prose.
    """

    def __init__(
        self, message: str, *, code: int, enhanced: tuple[int, int, int] | None = None
    ) -> None:
        super().__init__(message, transient=400 <= code < 500)
        self.code = code
        self.enhanced = enhanced


class InvalidCommandArgument(DeliveryError, ValueError):
    """An SMTP command argument holds CR, LF or NUL, or needs SMTPUTF8 the peer lacks.

    Postwire's own refusal, made before the command is sent: `enhanced` is the RFC 3463 code
    that stands for it (5.6.7 "non-ASCII addresses not permitted" for SMTPUTF8, RFC 6531).
    """

    def __init__(self, message: str, *, enhanced: tuple[int, int, int] = (5, 5, 4)) -> None:
        super().__init__(message, transient=False)
        self.enhanced = enhanced


class DestinationRefused(DeliveryError):
    """Postwire will not connect where the recipient's domain leads: loopback, private,
    link-local or its own addresses (see `delivery/destination_policy.py`). Its own refusal,
    made before any connection; `enhanced` 5.4.4 (unable to route)."""

    enhanced = (5, 4, 4)

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False)
