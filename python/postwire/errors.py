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
    └── SpoolError               the durable spool failed; nothing of the write was kept
        ├── SpoolFullError       the map is full: back off (SMTP 451, HTTP 503)
        ├── KeyExistsError       an insert found its key taken (idempotency races)
        ├── LeaseLostError       the lease expired or was taken over; do not ack
        └── NoSuchMessageError   the message is not (or no longer) in the spool
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
    """The spool's map is full; callers answer with a temporary failure."""


class KeyExistsError(SpoolError):
    """An insert-if-absent found the key already present; nothing of its batch was written."""

    def __init__(self, message: str, table: str = "", key: bytes = b"") -> None:
        super().__init__(message)
        self.table = table
        self.key = key


class LeaseLostError(SpoolError):
    """The message's lease expired or another worker holds it now."""


class NoSuchMessageError(SpoolError):
    """The message is not in the spool (never was, or already delivered or removed)."""
