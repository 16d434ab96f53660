"""When a message that failed temporarily is tried again, and when it is given up.

Waits start at a few minutes, so a greylisting server or a brief outage costs little, and grow
to hours, so a destination that is down for a day is not hammered:

    after attempt   1     2      3      4      5    6    7    8 and later
    wait            5 m   10 m   20 m   40 m   1 h  2 h  4 h  4 h

A small jitter (up to `JITTER_FRACTION` of the wait, never negative) spreads retries of messages
that failed together; its source is injected so that tests are exact. No attempt is scheduled
past `first_attempt_at + max_age`: the last one falls on that deadline, and after it the message
is given up (bounced).
"""

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

RETRY_WAITS: Final[tuple[timedelta, ...]] = (
    timedelta(minutes=5),
    timedelta(minutes=10),
    timedelta(minutes=20),
    timedelta(minutes=40),
    timedelta(hours=1),
    timedelta(hours=2),
    timedelta(hours=4),
)
JITTER_FRACTION: Final = 0.1

# Given the number of attempts made so far, a number in [0, 1): the share of the maximal jitter.
JitterSource = Callable[[int], float]


def retry_wait(attempts: int) -> timedelta:
    """The wait, before jitter, after `attempts` attempts (1 or more) have failed."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    return RETRY_WAITS[min(attempts, len(RETRY_WAITS)) - 1]


def next_attempt_at(
    first_attempt_at: datetime,
    attempts: int,
    now: datetime,
    *,
    max_age: timedelta,
    jitter: JitterSource | None = None,
) -> datetime | None:
    """When to try again after the `attempts`-th attempt failed at `now`; None: give up.

    `jitter` None means no jitter. The result is never later than `first_attempt_at + max_age`;
    once `now` has reached that deadline, the answer is None.
    """
    deadline = first_attempt_at + max_age
    if now >= deadline:
        return None
    wait = retry_wait(attempts)
    if jitter is not None:
        share = jitter(attempts)
        if not 0.0 <= share < 1.0:
            raise ValueError(f"a jitter source must return a number in [0, 1), got {share}")
        wait += wait * (JITTER_FRACTION * share)
    return min(now + wait, deadline)


def stable_jitter(key: str) -> JitterSource:
    """A jitter source that depends only on `key` (a message id) and the attempt number.

    Retries of one message are reproducible across restarts; messages that failed together
    still spread out, because their keys differ.
    """

    def share(attempts: int) -> float:
        digest = hashlib.blake2b(f"{key}\0{attempts}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    return share
