"""Domain health rules: a sending domain's complaint and hard bounce rates over rolling windows
against the thresholds mailbox providers publish, and the state they put it in. Pure: counts
in, a verdict out (`metrics.domain_health` reads the counts and keeps the state).

The thresholds, with their sources (docs/domain-health.md says more):

- complaint rate (complaints ÷ delivered): Google's and Yahoo's sender requirements (2024) ask
  bulk senders to stay under 0.3% (critical here) and Google recommends under 0.1% (warning);
- hard bounce rate (permanent bounces ÷ deliveries that ended): under 2% is the figure most
  senders' guides give (warning); at 5% Amazon SES puts an account under review (critical).

A rate is judged only over at least MIN_VOLUME messages (delivered ones for complaints, ended
deliveries for bounces): one complaint among ten emails says little.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal

State = Literal["ok", "warning", "critical"]
# Worse states rank higher: a move up is a crossing (and a warning event), a move down is not.
RANK: Final[dict[str, int]] = {"ok": 0, "warning": 1, "critical": 2}
MIN_VOLUME: Final = 100


@dataclass(frozen=True, slots=True)
class Threshold:
    metric: str  # "complaint_rate" | "hard_bounce_rate"
    label: str
    warning: float  # percent: at or above it, the state is warning
    critical: float  # percent: at or above it, critical
    source: str


THRESHOLDS: Final = (
    Threshold("complaint_rate", "Complaint rate", 0.1, 0.3,
              "Google and Yahoo sender requirements: under 0.3%, Google recommends under 0.1%"),
    Threshold("hard_bounce_rate", "Hard bounce rate", 2.0, 5.0,
              "common guidance: under 2%; Amazon SES reviews accounts at 5%"),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Window:
    name: str  # "24h" | "7d"
    label: str
    length: timedelta


# The last 24 hours (hour counts, the current hour the last) and the last 7 days (day counts,
# today the last): a sudden problem shows in the first, a steady one in the second.
WINDOWS: Final = (
    Window("24h", "Last 24 hours", timedelta(hours=24)),
    Window("7d", "Last 7 days", timedelta(days=7)),
)


@dataclass(frozen=True, slots=True)
class Check:
    """One rate over one window, and what it says."""

    window: str
    metric: str
    rate: float  # percent, two decimals
    volume: int  # the messages it is a share of
    state: State | None  # None: fewer than MIN_VOLUME messages, not judged


@dataclass(frozen=True, slots=True)
class Health:
    state: State
    checks: tuple[Check, ...]

    @property
    def crossed(self) -> tuple[Check, ...]:
        """The checks past a threshold, worst first."""
        bad = [check for check in self.checks if check.state not in (None, "ok")]
        return tuple(sorted(bad, key=lambda check: -RANK[check.state or "ok"]))


def judge(rate: float, threshold: Threshold) -> State:
    if rate >= threshold.critical:
        return "critical"
    if rate >= threshold.warning:
        return "warning"
    return "ok"


def window_checks(window: str, counts: dict[str, int]) -> tuple[Check, ...]:
    """The checks of one window's counts (the metrics' counter names)."""
    delivered = counts.get("delivered", 0)
    ended = delivered + counts.get("bounced", 0)
    shares = {
        "complaint_rate": (counts.get("complained", 0), delivered),
        "hard_bounce_rate": (counts.get("bounced_permanent", 0), ended),
    }
    checks = []
    for threshold in THRESHOLDS:
        part, whole = shares[threshold.metric]
        rate = 0.0 if whole <= 0 else 100 * part / whole
        # Judged unrounded: 0.0996% is under the 0.1% warning even though it shows as 0.1.
        state = judge(rate, threshold) if whole >= MIN_VOLUME else None
        checks.append(Check(window, threshold.metric, round(rate, 2), whole, state))
    return tuple(checks)


def domain_health(counts_by_window: dict[str, dict[str, int]]) -> Health:
    """The domain's state: the worst of its checks over every window (ok when none is
    judged)."""
    checks = tuple(
        check
        for window in WINDOWS
        for check in window_checks(window.name, counts_by_window.get(window.name, {}))
    )
    worst = max((RANK[c.state] for c in checks if c.state is not None), default=0)
    state: State = ("ok", "warning", "critical")[worst]
    return Health(state, checks)


def worsened(before: str, after: str) -> bool:
    """Whether moving from state `before` to `after` crosses a threshold upwards."""
    return RANK.get(after, 0) > RANK.get(before, 0)


def threshold_of(metric: str) -> Threshold:
    return next(threshold for threshold in THRESHOLDS if threshold.metric == metric)


# What pages call each state.
STATE_WORDS: Final = {"ok": "Healthy", "warning": "Warning", "critical": "Critical"}
# The badge style of each state (dashboard.css's status colours).
STATE_BADGES: Final = {"ok": "verified", "warning": "delivery_delayed", "critical": "failed"}


@dataclass(frozen=True, slots=True)
class HealthRow:
    """One rate of one window as a page shows it."""

    window: str  # its label
    metric: str  # its label
    rate: float
    warning: float
    critical: float
    volume: int
    state: State | None


def health_rows(checks: list[dict[str, Any]]) -> list[HealthRow]:
    """The rows of a stored verdict's checks (`store.domain_health`), window by window."""
    windows = {window.name: window.label for window in WINDOWS}
    rows = []
    for check in checks:
        threshold = threshold_of(str(check["metric"]))
        state = check.get("state")
        rows.append(
            HealthRow(
                windows.get(str(check["window"]), str(check["window"])),
                threshold.label,
                float(check["rate"]),
                threshold.warning,
                threshold.critical,
                int(check["volume"]),
                state if state in RANK else None,
            )
        )
    return rows
