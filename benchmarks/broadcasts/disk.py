"""The disk under the spool, from /proc/diskstats: how busy it was, what was written and how
long its flushes (the spool's fsyncs) took, between two readings. A commit returns only once
its fsync has, so a busy disk is time the broadcast waits without using CPU."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cpu_time import child_pids

SECTOR_BYTES = 512


@dataclass(frozen=True)
class DiskReading:
    device: str
    busy_ms: int  # io_ticks: time with at least one request in flight
    bytes_written: int
    flushes: int
    flush_ms: int

    def since(self, before: DiskReading) -> DiskReading:
        return DiskReading(
            self.device,
            self.busy_ms - before.busy_ms,
            self.bytes_written - before.bytes_written,
            self.flushes - before.flushes,
            self.flush_ms - before.flush_ms,
        )


def disk_reading(path: Path) -> DiskReading | None:
    """The counters of the block device holding `path` (None when /proc does not say)."""
    device = os.stat(path).st_dev
    wanted = (os.major(device), os.minor(device))
    try:
        lines = Path("/proc/diskstats").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if (int(fields[0]), int(fields[1])) != wanted:
            continue
        values = [int(v) for v in fields[3:]]
        # Flush counters came with Linux 5.5: 0 when absent.
        flushes, flush_ms = (values[15], values[16]) if len(values) >= 17 else (0, 0)
        return DiskReading(fields[2], values[9], values[6] * SECTOR_BYTES, flushes, flush_ms)
    return None


def process_write_bytes(pid: int) -> int:
    """Bytes `pid` and its workers caused to be written so far (/proc/<pid>/io write_bytes:
    pages they dirtied, those of the spool's map included)."""
    total = 0
    for process in (pid, *child_pids(pid)):
        try:
            for line in Path(f"/proc/{process}/io").read_text().splitlines():
                if line.startswith("write_bytes:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total
