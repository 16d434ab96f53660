"""Transactional sends at a steady, modest rate: the latency of `POST /emails` seen by an
application while the server is idle, then while a broadcast runs.

Calls are planned at fixed times (`rate` a second) and handed to a few client threads, each with
its own keep-alive connection; a call's latency runs from its planned time to its reply, so a
server that stalls is charged for the calls it held back as well (no coordinated omission).
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

THREADS = 8
REQUEST_TIMEOUT = 30.0


@dataclass(frozen=True)
class Latencies:
    """The calls of one period: each one's seconds from planned to replied, and the failures."""

    seconds: list[float]
    errors: int
    duration: float

    def percentile(self, share: float) -> float:
        """Nearest-rank percentile, in milliseconds (0 when nothing was measured)."""
        if not self.seconds:
            return 0.0
        ordered = sorted(self.seconds)
        rank = max(1, math.ceil(share * len(ordered)))
        return ordered[rank - 1] * 1000

    @property
    def p50_ms(self) -> float:
        return self.percentile(0.50)

    @property
    def p99_ms(self) -> float:
        return self.percentile(0.99)

    @property
    def max_ms(self) -> float:
        return max(self.seconds, default=0.0) * 1000

    @property
    def calls(self) -> int:
        return len(self.seconds) + self.errors


class SteadySends:
    """Post one small email `rate` times a second until `stop()`; `email(n)` makes the n-th body."""

    def __init__(
        self,
        base_url: str,
        token: str,
        rate: float,
        email: Callable[[int], dict[str, object]],
    ) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.rate = rate
        self.email = email
        self._planned: queue.Queue[tuple[int, float] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._seconds: list[float] = []
        self._errors = 0
        self._first_error = ""
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._threads = [threading.Thread(target=self._plan, daemon=True)]
        self._threads += [threading.Thread(target=self._call, daemon=True) for _ in range(THREADS)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> Latencies:
        """Stop planning, let the calls in flight finish, and return what was measured."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=REQUEST_TIMEOUT + 5)
        with self._lock:
            return Latencies(list(self._seconds), self._errors, time.monotonic() - self._started)

    @property
    def first_error(self) -> str:
        return self._first_error

    def _plan(self) -> None:
        number = 0
        while not self._stopping.is_set():
            planned = self._started + number / self.rate
            delay = planned - time.monotonic()
            if delay > 0 and self._stopping.wait(delay):
                break
            self._planned.put((number, planned))
            number += 1
        for _ in range(THREADS):
            self._planned.put(None)

    def _call(self) -> None:
        with httpx.Client(
            base_url=self.base_url, headers=self.headers, timeout=REQUEST_TIMEOUT
        ) as client:
            while (item := self._planned.get()) is not None:
                number, planned = item
                try:
                    response = client.post("/emails", json=self.email(number))
                    failed = (
                        "" if response.is_success else f"{response.status_code} {response.text}"
                    )
                except httpx.HTTPError as error:
                    failed = repr(error)
                replied = time.monotonic()
                with self._lock:
                    if failed:
                        self._errors += 1
                        self._first_error = self._first_error or failed[:300]
                    else:
                        self._seconds.append(replied - planned)
