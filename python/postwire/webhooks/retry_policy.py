"""When a webhook message is tried again, and when an endpoint that keeps failing is disabled
(contract section 8.4), as pure functions."""

from __future__ import annotations

from typing import Final

SECOND_MS: Final = 1000
HOUR_MS: Final = 3600 * SECOND_MS
# The waits after the first, second, ... failed attempt; each starts at that failure.
RETRY_DELAYS_MS: Final = (
    5 * SECOND_MS,
    5 * 60 * SECOND_MS,
    30 * 60 * SECOND_MS,
    2 * HOUR_MS,
    5 * HOUR_MS,
    10 * HOUR_MS,
    10 * HOUR_MS,
)
# An endpoint that has failed every attempt for this long is disabled (Svix's default).
DISABLE_AFTER_MS: Final = 5 * 24 * HOUR_MS


def next_attempt_ms(failed_attempts: int, now_ms: int) -> int | None:
    """When to try again after the `failed_attempts`-th failure at `now_ms`; None once the
    retries are spent (the message is then failed, and kept)."""
    if not 1 <= failed_attempts <= len(RETRY_DELAYS_MS):
        return None
    return now_ms + RETRY_DELAYS_MS[failed_attempts - 1]


def should_disable(failing_since_ms: int | None, now_ms: int) -> bool:
    """Whether an endpoint failing since `failing_since_ms` (None: it is not) is disabled."""
    return failing_since_ms is not None and now_ms - failing_since_ms >= DISABLE_AFTER_MS
