"""What a service receives from the supervisor beside its config: `ServiceDeps`.

Services import this module, never `postwire.app`, so the supervisor can import every service
without an import circle. It names the handles of earlier services by the little each caller
needs of them (the `Protocol`s below), so it imports no feature package either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio

if TYPE_CHECKING:
    from postwire.domains.store import DomainRecord
    from postwire.store.spool import Spool


class Wakeable(Protocol):
    """A service that polls for due work (delivery, webhook dispatch)."""

    def wake(self) -> None:
        """Work may be due: look now instead of at the next poll."""


class VerificationRequests(Protocol):
    """The domain verifier, as the API asks it to check a domain at once."""

    async def request_verification(self, team_id: str, domain_id: str) -> DomainRecord:
        """Restart the domain's verification and check it now; return it as stored."""


class Reloads:
    """What SIGHUP reloads in one process: each service that holds files read at start (the
    SMTP certificate) registers how to read them again; the first process also passes the
    signal on to its workers."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], None]] = []

    def register(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def reload(self) -> None:
        for callback in list(self._callbacks):
            callback()


@dataclass(frozen=True, slots=True)
class ServiceDeps:
    """What a service receives beside the config: handles of the services started before it."""

    spool: Spool
    # 0 in the first process, which alone runs the services that must run once; 1.. in workers.
    process_index: int = 0
    # Set when the service's stage starts stopping: close listeners or stop leasing, finish what
    # is in hand, then return. Each stage gets its own event (see `app.Stage.start`).
    stopping: trio.Event = field(default_factory=trio.Event)
    domain_verifier: VerificationRequests | None = None
    delivery: Wakeable | None = None
    webhooks: Wakeable | None = None
    # One per process, shared by every stage's copy of the deps.
    reloads: Reloads = field(default_factory=Reloads)
