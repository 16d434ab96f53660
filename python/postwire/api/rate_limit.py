"""Per-team request rate limit (contract section 12), a fixed one-second window.

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

    def headers(self) -> dict[str, str]:
        headers = {
            "ratelimit-limit": str(self.limit),
            "ratelimit-remaining": str(self.remaining),
            "ratelimit-reset": str(self.reset_seconds),
            "ratelimit-policy": f"{self.limit};w=1",
        }
        if not self.allowed:
            headers["retry-after"] = str(self.reset_seconds)
        return headers


class RateLimiter:
    """Counts requests per team in the current second; `limit` 0 disables it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._window: dict[str, tuple[int, int]] = {}  # team -> (window second, count)

    def check(self, team_id: str, now: float) -> RateDecision | None:
        """Count one request at `now` (seconds, monotonic); None when there is no limit."""
        if self.limit <= 0:
            return None
        second = math.floor(now)
        window, count = self._window.get(team_id, (second, 0))
        if window != second:
            window, count = second, 0
        if len(self._window) > 10_000:  # forget idle teams
            self._window = {t: w for t, w in self._window.items() if w[0] == second}
        reset = max(1, math.ceil(window + 1 - now))
        if count >= self.limit:
            self._window[team_id] = (window, count)
            return RateDecision(False, self.limit, 0, reset)
        self._window[team_id] = (window, count + 1)
        return RateDecision(True, self.limit, self.limit - count - 1, reset)
