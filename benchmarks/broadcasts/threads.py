"""CPU seconds of each of the server's threads, grouped by thread name (/proc/<pid>/task), so
a report can say where the cores went: the Trio thread that runs Python (the API, rendering,
the engine's loop), the worker threads that sign (RSA releases the GIL), the spool's committer.
py-spy `--gil` sees only the first; this sees them all."""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

from benchmarks.cpu_time import child_pids

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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
            totals[re.sub(r"\d+", "N", name)] += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return dict(totals)


def cpu_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Seconds each thread name used between two readings (threads that ended are lost)."""
    return {
        name: after[name] - before.get(name, 0.0)
        for name in after
        if after[name] - before.get(name, 0.0) > 0
    }
