"""Counted arrivals at a benchmark's receiving peer: messages at smtp-sink, POSTs at nginx. A
thread reading the peer's output records when the count reached each number; rounds wait on it.
"""

from __future__ import annotations

import subprocess
import threading
import time

from benchmarks.report import progress

# How often a long wait says how far it got.
PROGRESS_SECONDS = 5.0


class Arrivals:
    """The monotonic times at which the count reached 1, 2, ... (the peer's reader thread
    appends them under `_lock`). A subclass runs the peer as `process` and names what arrives
    (`unit`), where (`peer`), and the error it raises when the peer stops (`error`)."""

    unit = "arrivals"
    peer = "the peer"
    error: type[RuntimeError] = RuntimeError

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self._times: list[float] = []
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._times)

    def time_reached(self, count: int) -> float | None:
        """When the count first reached `count` (monotonic), or None if it has not."""
        with self._lock:
            return self._times[count - 1] if len(self._times) >= count else None

    def wait_for(self, count: int, timeout: float) -> float | None:
        """Wait until `count` have arrived; the time the last one did, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reached = self.time_reached(count)
            if reached is not None:
                return reached
            if self.process is None or self.process.poll() is not None:
                raise self.error(f"{self.peer} stopped")
            time.sleep(0.01)
        return None

    def wait_for_all(
        self,
        count: int,
        *,
        timeout: float,
        label: str,
        base: int,
        since: float,
        started: float | None = None,
    ) -> float:
        """When the count reached `count`; the run fails (SystemExit) if it has not `timeout`
        seconds after `started` (default: now). Every few seconds, progress: how many arrived
        after the first `base`, and at what rate `since` that time."""
        deadline = (time.monotonic() if started is None else started) + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SystemExit(
                    f"{label}: only {self.count - base} of {count - base} {self.unit} reached "
                    f"{self.peer} within {timeout:g} s"
                )
            done = self.wait_for(count, min(PROGRESS_SECONDS, remaining))
            if done is not None:
                return done
            elapsed, arrived = time.monotonic() - since, self.count - base
            progress(
                f"{label}: {arrived} {self.unit} after {elapsed:.0f} s ({arrived / elapsed:,.0f}/s)"
            )
