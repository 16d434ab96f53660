"""CPU seconds of each of the server's threads, grouped by thread name (/proc/<pid>/task), so
a report can say where the cores went: the Trio thread that runs Python (the API, rendering,
the engine's loop), the worker threads that sign (RSA releases the GIL), the spool's committer.
py-spy `--gil` sees only the first; this sees them all."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
from pathlib import Path

from benchmarks.cpu_time import child_pids

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def thread_kind(name: str) -> str:
    """A thread's name without its numbers; Trio's worker threads, which take the name of the
    job they run ("sign_chunk from ...", cut to 15 characters) while they run it, as one."""
    if name.startswith("Trio thread") or " from" in name:
        return "Trio worker threads"
    return re.sub(r"\d+", "N", name)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far by thread name (digits made `N`), over `pid` and its workers."""
    totals: collections.defaultdict[str, float] = collections.defaultdict(float)
    for process in (pid, *child_pids(pid)):
        for task in Path(f"/proc/{process}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                stat = (task / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            fields = stat[stat.rindex(")") + 2 :].split()
            totals[thread_kind(name)] += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return dict(totals)


def cpu_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Seconds each thread name used between two readings (threads that ended are lost)."""
    return {
        name: after[name] - before.get(name, 0.0)
        for name in after
        if after[name] - before.get(name, 0.0) > 0
    }


class ThreadStates:
    """How many threads of each name were found running (or runnable), waiting on the disk
    (state D: an fsync, a page fault on the spool's map) or sleeping, on average over samples
    taken every `seconds` until `stop()`. Idle worker threads count as sleeping."""

    def __init__(self, pid: int, seconds: float = 0.05) -> None:
        self.pid = pid
        self.seconds = seconds
        self.counts: collections.defaultdict[str, collections.Counter[str]] = (
            collections.defaultdict(collections.Counter)
        )
        self.rounds = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, dict[str, float]]:
        """Each thread name's threads in each state (running, disk, sleeping), on average."""
        self._stopping.set()
        self._thread.join()
        rounds = max(self.rounds, 1)
        return {
            name: {state: count / rounds for state, count in states.items()}
            for name, states in self.counts.items()
        }

    def _run(self) -> None:
        # A sampler that waits for a free core sees busy threads less than they run: ahead of
        # the server's threads, it looks while they run.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
        while not self._stopping.wait(self.seconds):
            self.rounds += 1
            for process in (self.pid, *child_pids(self.pid)):
                for task in Path(f"/proc/{process}/task").glob("*"):
                    try:
                        name = (task / "comm").read_text().strip()
                        stat = (task / "stat").read_text()
                    except OSError:
                        continue
                    letter = stat[stat.rindex(")") + 2]
                    state = {"R": "running", "D": "disk"}.get(letter, "sleeping")
                    self.counts[thread_kind(name)][state] += 1
