"""Where mail for a recipient domain goes: the candidate hosts and their addresses.

The resolution errors say whether the failure is permanent and which RFC 3463 status code
stands for it, so that bounce classification needs no knowledge of DNS.
"""

from typing import ClassVar

from postwire.errors import PostwireError

EnhancedStatus = tuple[int, int, int]


class DestinationError(PostwireError):
    """Mail for a domain cannot be routed: now (transient) or ever (permanent)."""

    enhanced: ClassVar[EnhancedStatus] = (4, 4, 0)

    def __init__(self, domain: str, message: str) -> None:
        super().__init__(message)
        self.domain = domain

    @property
    def permanent(self) -> bool:
        return self.enhanced[0] == 5


class NullMxError(DestinationError):
    """The domain publishes a null MX (RFC 7505): it accepts no mail."""

    enhanced = (5, 1, 10)


class NoSuchDomainError(DestinationError):
    """The domain does not exist (NXDOMAIN)."""

    enhanced = (5, 1, 2)


class NoMailHostError(DestinationError):
    """DNS answered, but no MX host and no implicit MX has an address."""

    enhanced = (5, 4, 4)


class DnsTemporaryError(DestinationError):
    """DNS failed for now: SERVFAIL, refusal or timeout from every server."""

    enhanced = (4, 4, 3)
