"""What every API handler works with, passed explicitly rather than through globals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import trio

from postwire.accept import Acceptor
from postwire.config import Config
from postwire.services import VerificationRequests, Wakeable
from postwire.store.spool import Spool
from postwire.webhooks.tracking import Tracking


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class ApiContext:
    config: Config
    spool: Spool
    # Injectable clocks: wall time for records, monotonic seconds for rate windows.
    now: Callable[[], datetime] = utc_now
    monotonic: Callable[[], float] = trio.current_time
    # Asked to check a domain's DNS at once; None where no verifier runs (checks then wait for
    # the periodic scan of a verifier started later).
    domain_verifier: VerificationRequests | None = None
    # Woken after each accepted commit, so new mail leaves at once rather than at the next poll.
    delivery: Wakeable | None = None
    # The webhook dispatcher, woken after a replay for the same reason.
    webhooks: Wakeable | None = None
    # Key id -> when its last_used_at was last written, to write it at most once a minute.
    key_use_written: dict[str, float] = field(default_factory=dict)
    tracking: Tracking = field(init=False)
    acceptor: Acceptor = field(init=False)

    def __post_init__(self) -> None:
        self.tracking = Tracking(self.spool, self.config.api.public_url)
        self.acceptor = Acceptor(self.spool, tracking=self.tracking, path="rest")

    def now_ms(self) -> int:
        return int(self.now().timestamp() * 1000)
