"""Table tests of the fixed-window rate limiter (no clock: times are given)."""

from __future__ import annotations

import pytest

from postwire.rate_limit import RateLimiter


def test_a_per_second_limit_refuses_the_excess_and_resets_next_second() -> None:
    limiter = RateLimiter(2)
    decisions = [limiter.check("team", now) for now in (10.1, 10.5, 10.9, 11.0)]
    assert [d.allowed for d in decisions if d is not None] == [True, True, False, True]
    refused = decisions[2]
    assert refused is not None
    assert refused.headers()["retry-after"] == "1"
    assert refused.headers()["ratelimit-policy"] == "2;w=1"


def test_keys_are_counted_apart() -> None:
    limiter = RateLimiter(1)
    assert limiter.check("a", 5.0) is not None and limiter.check("b", 5.0) is not None
    refused = limiter.check("a", 5.5)
    assert refused is not None and not refused.allowed


@pytest.mark.parametrize(
    ("counted_at", "asked_at", "exhausted"),
    [
        ((), 0.0, False),
        ((0.0, 1.0), 2.0, False),
        ((0.0, 1.0, 59.9), 59.9, True),
        ((0.0, 1.0, 59.9), 60.0, False),  # a new minute
        ((50.0, 70.0, 80.0), 90.0, False),  # fixed windows: 50 fell in the previous one
        ((60.0, 70.0, 80.0), 119.0, True),
    ],
)
def test_a_minute_window(counted_at: tuple[float, ...], asked_at: float, exhausted: bool) -> None:
    limiter = RateLimiter(3, window_seconds=60)
    for moment in counted_at:
        limiter.check("team-1", moment)
    decision = limiter.check("team-1", asked_at)
    assert decision is not None and decision.allowed is not exhausted
    other = limiter.check("team-2", asked_at)
    assert other is not None and other.allowed
    reset = limiter.check("192.0.2.9", 61.0)
    assert reset is not None and reset.reset_seconds == 59


def test_no_limit() -> None:
    limiter = RateLimiter(0, window_seconds=60)
    assert limiter.check("x", 1.0) is None
