"""What every dashboard page works with, passed explicitly rather than through globals: the
same handles as the REST API's `ApiContext`, and an acceptor for the mail Postwire sends
itself (invitations, password resets, address checks)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from postwire.accept import Acceptor
from postwire.accounts.sessions import SessionLimits
from postwire.config import Config
from postwire.services import VerificationRequests, Wakeable
from postwire.store.spool import Spool
from postwire.webhooks.tracking import Tracking


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class DashboardContext:
    config: Config
    spool: Spool
    # Injectable clocks: wall time for records and session timeouts, monotonic seconds for
    # throttles.
    now: Callable[[], datetime] = utc_now
    monotonic: Callable[[], float] = time.monotonic
    # As in ApiContext: the domain verifier asked to check a domain at once, the delivery
    # engine and the webhook dispatcher woken after a commit that gives them work.
    domain_verifier: VerificationRequests | None = None
    delivery: Wakeable | None = None
    webhooks: Wakeable | None = None
    # Session id -> the last_seen_at it had when a write of a newer one was started.
    touching: dict[str, float] = field(default_factory=dict)
    tracking: Tracking = field(init=False)
    acceptor: Acceptor = field(init=False)

    def __post_init__(self) -> None:
        self.tracking = Tracking(self.spool, self.config.api.public_url)
        self.acceptor = Acceptor(self.spool, tracking=self.tracking)

    def now_seconds(self) -> float:
        """Wall time as Unix seconds: what session records hold."""
        return self.now().timestamp()

    @property
    def session_limits(self) -> SessionLimits:
        dashboard = self.config.dashboard
        return SessionLimits(
            idle_seconds=dashboard.session_idle_minutes * 60.0,
            absolute_seconds=dashboard.session_max_hours * 3600.0,
        )
