"""Fixed-window rate limits of API requests per team (contract section 12). (Failed SMTP AUTH
attempts are counted in the store, shared by every process: `store/auth_failures.py`.)

A fixed window is what the `ratelimit-*` headers (IETF draft-06) describe: a limit, what is
left of it, and the seconds until the window resets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int
    window_seconds: int = 1

    def headers(self) -> dict[str, str]:
        headers = {
            "ratelimit-limit": str(self.limit),
            "ratelimit-remaining": str(self.remaining),
            "ratelimit-reset": str(self.reset_seconds),
            "ratelimit-policy": f"{self.limit};w={self.window_seconds}",
        }
        if not self.allowed:
            headers["retry-after"] = str(self.reset_seconds)
        return headers


class RateLimiter:
    """Counts events per key (a team, a client address) in the current window of
    `window_seconds`; `limit` 0 disables it."""

    def __init__(self, limit: int, window_seconds: int = 1) -> None:
        self.limit = limit
        self.window_seconds = window_seconds
        self._window: dict[str, tuple[int, int]] = {}  # key -> (window start, count)

    def check(self, key: str, now: float) -> RateDecision | None:
        """Count one event at `now` (seconds, monotonic); None when there is no limit."""
        if self.limit <= 0:
            return None
        start, count = self._current(key, now)
        if len(self._window) > 10_000:  # forget idle keys
            self._window = {k: w for k, w in self._window.items() if w[0] == start}
        reset = max(1, math.ceil(start + self.window_seconds - now))
        if count >= self.limit:
            self._window[key] = (start, count)
            return RateDecision(False, self.limit, 0, reset, self.window_seconds)
        self._window[key] = (start, count + 1)
        return RateDecision(True, self.limit, self.limit - count - 1, reset, self.window_seconds)

    def _current(self, key: str, now: float) -> tuple[int, int]:
        start = math.floor(now / self.window_seconds) * self.window_seconds
        window, count = self._window.get(key, (start, 0))
        return (window, count) if window == start else (start, 0)
