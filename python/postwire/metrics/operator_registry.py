"""The operator metrics one process keeps in memory: `OPERATOR_METRICS`, module-wide.

The send and delivery paths call into it on every message, so it costs what a dict update
costs: plain integers, no locks (Trio runs one task at a time; the only other thread that
touches it is none), histograms as fixed arrays of bucket counts. Each process keeps its own;
`operator_publication` writes a snapshot into the spool every few seconds and the Prometheus
listener (`prometheus.py`) gathers every process's latest one. Counters start at zero with the
process, as Prometheus expects of a counter whose process restarted.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from postwire.delivery.bounces import Outcome

# Where messages come from: the REST API, SMTP submission, broadcasts, Postwire's own mail
# (sign-in links, invitations).
ACCEPT_PATHS: Final = ("rest", "smtp", "broadcast", "system")
# A delivery outcome per recipient: the reply's class (2, 4 or 5, from the enhanced status
# code, else the basic code), or no reply at all because DNS, the connection, or a refusal of
# Postwire's own (TLS required and not offered, a forbidden destination) stood in the way.
OUTCOME_CLASSES: Final = ("2", "4", "5", "dns", "connection", "local")
WEBHOOK_RESULTS: Final = ("succeeded", "failed")

# Seconds. Signing one message takes about a millisecond with RSA-2048, far less with Ed25519.
SIGNING_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# From the event to the endpoint's 2xx: retries reach hours.
WEBHOOK_BUCKETS: Final = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip

# The `counters` table's count of messages waiting to retry: the delivery engine adds to it
# in the commit that first reschedules a message and takes from it in the one that ends it.
RETRY_BACKLOG_KEY: Final = b"operator/retry_backlog"
# The same per recipient domain (`{prefix}{domain}`): messages waiting to retry with a pending
# recipient there, kept in the commits that change which recipients a retried message waits on.
RETRY_DESTINATION_PREFIX: Final = RETRY_BACKLOG_KEY + b"/"

# Destinations reported per process: the deepest ones; the rest are summed as "other".
MAX_DESTINATIONS: Final = 20
OTHER_DESTINATIONS: Final = "other"


class Histogram:
    """Counts of observations per bucket (upper bounds `bounds`, then +Inf), and their sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times

    def snapshot(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "sum": self.total}


class OperatorMetrics:
    """What this process counted since it started, and what it holds now."""

    def __init__(self) -> None:
        self.accepted = dict.fromkeys(ACCEPT_PATHS, 0)
        self.outcomes = dict.fromkeys(OUTCOME_CLASSES, 0)
        self.webhook_attempts = dict.fromkeys(WEBHOOK_RESULTS, 0)
        self.signing = Histogram(SIGNING_BUCKETS)
        self.webhook_delivery = Histogram(WEBHOOK_BUCKETS)
        # Recipient domain -> {message id: when it was enqueued (ms)}, for the messages this
        # process's delivery engine has in hand for that domain.
        self.in_hand: dict[str, dict[str, int]] = {}

    def count_accepted(self, path: str | None, messages: int) -> None:
        if path is not None:
            self.accepted[path] += messages

    def count_outcomes(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            self.outcomes[outcome_class(outcome)] += 1

    def destination_taken(self, domain: str, message_id: str, enqueued_at_ms: int) -> None:
        held = self.in_hand.get(domain)
        if held is None:
            held = self.in_hand[domain] = {}
        held[message_id] = enqueued_at_ms

    def destination_done(self, domain: str, message_id: str) -> None:
        held = self.in_hand.get(domain)
        if held is not None:
            held.pop(message_id, None)
            if not held:
                del self.in_hand[domain]

    def signed(self, messages: int, seconds: float) -> None:
        """`messages` signed together in `seconds`: each counts its share."""
        if messages > 0:
            self.signing.observe(seconds / messages, messages)

    def webhook_attempted(self, succeeded: bool, event_created_at_ms: int, now_ms: int) -> None:
        self.webhook_attempts["succeeded" if succeeded else "failed"] += 1
        if succeeded:
            self.webhook_delivery.observe(max(0.0, (now_ms - event_created_at_ms) / 1000))

    def snapshot(self, now_ms: int | None = None) -> dict[str, Any]:
        """Everything as JSON values, for the spool and the exposition."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return {
            "accepted": dict(self.accepted),
            "outcomes": dict(self.outcomes),
            "webhook_attempts": dict(self.webhook_attempts),
            "signing": self.signing.snapshot(),
            "webhook_delivery": self.webhook_delivery.snapshot(),
            "destinations": destinations(self.in_hand, now_ms),
        }


def retry_destination_changes(
    waiting_before: Iterable[str], waiting_after: Iterable[str]
) -> list[tuple[str, int]]:
    """The recipient domains whose retry queue a message enters (+1) or leaves (-1) when it
    waited to retry for the recipients `waiting_before` (none: it was not in retry) and now
    waits for `waiting_after` (none: it is finished or was never retried). The delivery
    engine adds each to the domain's count (`retry_destination_key`) and its waiting rows."""
    before = {_domain_of(address) for address in waiting_before}
    after = {_domain_of(address) for address in waiting_after}
    return [(d, -1) for d in sorted(before - after)] + [(d, 1) for d in sorted(after - before)]


def retry_destination_key(domain: str) -> bytes:
    return RETRY_DESTINATION_PREFIX + domain.encode()


def _domain_of(address: str) -> str:
    return address.rpartition("@")[2].lower()


def destinations(in_hand: dict[str, dict[str, int]], now_ms: int) -> dict[str, list[float]]:
    """Destination -> [messages in hand, age in seconds of the oldest]: the deepest
    `MAX_DESTINATIONS`, the others together as "other" (labels stay few)."""
    ranked = sorted(in_hand.items(), key=lambda item: len(item[1]), reverse=True)
    shown: dict[str, list[float]] = {}
    for number, (domain, held) in enumerate(ranked):
        if not held:
            continue
        age = max(0.0, (now_ms - min(held.values())) / 1000)
        name = domain if number < MAX_DESTINATIONS else OTHER_DESTINATIONS
        depth, oldest = shown.get(name, [0, 0.0])
        shown[name] = [depth + len(held), max(oldest, age)]
    return shown


def outcome_class(outcome: Outcome) -> str:
    """The label of a recipient's outcome: the diagnostic says what answered, if anything."""
    if outcome.status == "delivered":  # the usual case first: only a reply delivers
        return "2"
    diagnostic = outcome.diagnostic
    if diagnostic.startswith("dns;"):
        return "dns"
    if diagnostic.startswith("network;"):
        return "connection"
    if diagnostic.startswith("local;"):
        return "local"
    return "5" if outcome.status == "permanent" else "4"


OPERATOR_METRICS: Final = OperatorMetrics()
