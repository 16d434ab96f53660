"""Retry policy: the wait table, jitter, and the max-age deadline."""

from datetime import UTC, datetime, timedelta

import pytest

from postwire.delivery.retry_policy import (
    JITTER_FRACTION,
    next_attempt_at,
    retry_wait,
    stable_jitter,
)

FIRST = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MAX_AGE = timedelta(hours=72)
M = timedelta(minutes=1)
H = timedelta(hours=1)


@pytest.mark.parametrize(
    ("attempts", "wait"),
    [(1, 5 * M), (2, 10 * M), (3, 20 * M), (4, 40 * M), (5, H), (6, 2 * H), (7, 4 * H),
     (8, 4 * H), (30, 4 * H)],
)  # fmt: skip
def test_waits_grow_from_minutes_to_hours(attempts: int, wait: timedelta) -> None:
    assert retry_wait(attempts) == wait
    now = FIRST + H  # the wait counts from the failure, not from the first attempt
    assert next_attempt_at(FIRST, attempts, now, max_age=MAX_AGE) == now + wait


@pytest.mark.parametrize(
    ("now", "attempts", "expected"),
    [
        # Well before the deadline: the plain wait.
        (FIRST + 10 * H, 8, FIRST + 14 * H),
        # A wait that would cross the deadline ends on it: one last attempt there.
        (FIRST + 70 * H, 8, FIRST + MAX_AGE),
        (FIRST + MAX_AGE - M, 1, FIRST + MAX_AGE),
        # At or past the deadline: give up.
        (FIRST + MAX_AGE, 8, None),
        (FIRST + MAX_AGE + H, 3, None),
    ],
)
def test_never_past_max_age(now: datetime, attempts: int, expected: datetime | None) -> None:
    assert next_attempt_at(FIRST, attempts, now, max_age=MAX_AGE) == expected


def test_zero_max_age_gives_up_at_once() -> None:
    assert next_attempt_at(FIRST, 1, FIRST, max_age=timedelta(0)) is None


@pytest.mark.parametrize(
    ("share", "attempts", "extra"),
    [(0.0, 1, timedelta(0)), (0.5, 1, 15 * timedelta(seconds=1)), (0.5, 7, 12 * M),
     (0.999, 5, timedelta(seconds=359.64))],
)  # fmt: skip
def test_jitter_adds_at_most_a_tenth(share: float, attempts: int, extra: timedelta) -> None:
    seen: list[int] = []

    def source(n: int) -> float:
        seen.append(n)
        return share

    now = FIRST + H
    result = next_attempt_at(FIRST, attempts, now, max_age=MAX_AGE, jitter=source)
    assert result == now + retry_wait(attempts) + extra
    assert seen == [attempts]
    assert extra < retry_wait(attempts) * JITTER_FRACTION


def test_jitter_does_not_cross_the_deadline() -> None:
    now = FIRST + MAX_AGE - 5 * M
    assert next_attempt_at(FIRST, 1, now, max_age=MAX_AGE, jitter=lambda _: 0.9) == FIRST + MAX_AGE


@pytest.mark.parametrize("share", [-0.1, 1.0, 2.0])
def test_jitter_source_out_of_range_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="jitter"):
        next_attempt_at(FIRST, 1, FIRST, max_age=MAX_AGE, jitter=lambda _: share)


@pytest.mark.parametrize("attempts", [0, -1])
def test_attempts_start_at_one(attempts: int) -> None:
    with pytest.raises(ValueError, match="attempts"):
        next_attempt_at(FIRST, attempts, FIRST, max_age=MAX_AGE)


def test_stable_jitter_is_reproducible_and_spreads() -> None:
    one, again, other = stable_jitter("msg-1"), stable_jitter("msg-1"), stable_jitter("msg-2")
    shares = [one(n) for n in range(1, 9)]
    assert shares == [again(n) for n in range(1, 9)]
    assert shares != [other(n) for n in range(1, 9)]
    assert all(0.0 <= s < 1.0 for s in shares)
    assert len(set(shares)) == len(shares)
