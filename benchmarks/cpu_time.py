"""CPU seconds used so far, per process, per process group and for the whole machine, read from
/proc. A benchmark takes two readings around a run; their difference over the wall time is the
number of cores that part kept busy (2 = the whole of a 2-core machine)."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """Fields of /proc/PID/stat from the third (state) on: index 11 is field 14 (utime)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name may hold spaces: fields are counted after its closing parenthesis.
    return stat[stat.rindex(")") + 2 :].split()


def process_cpu(pid: int) -> float:
    """CPU seconds used so far by every thread of `pid`."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


def _every_process() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat fields) of every live process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            yield int(entry.name), _stat_fields(int(entry.name))
        except (OSError, ValueError):
            continue  # ended meanwhile


def child_pids(parent: int) -> list[int]:
    """The live processes whose parent is `parent` (Postwire's worker processes)."""
    return [pid for pid, fields in _every_process() if int(fields[1]) == parent]  # ppid


def process_tree_cpu(pid: int) -> float:
    """CPU seconds used so far by `pid` and its live descendants (Postwire's worker processes)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for member, fields in _every_process():
        parents[member] = int(fields[1])  # ppid
        ticks[member] = int(fields[11]) + int(fields[12])
    tree = {pid}
    grew = True
    while grew:
        grown = {child for child, parent in parents.items() if parent in tree}
        grew = not grown <= tree
        tree |= grown
    return sum(ticks.get(member, 0) for member in tree) / _CLOCK_TICKS


def process_group_cpu(leader: int) -> float:
    """CPU seconds used so far by the process group led by `leader`: its live members, and the
    children the leader has reaped (a Postfix master's daemons, which come and go)."""
    total = 0
    for member, fields in _every_process():
        if int(fields[2]) != leader:  # pgrp
            continue
        total += int(fields[11]) + int(fields[12])
        if member == leader:
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / _CLOCK_TICKS


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (a load generator, once it has exited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_busy() -> float:
    """CPU seconds the whole machine has spent not idle."""
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy.
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _CLOCK_TICKS
